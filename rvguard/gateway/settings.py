"""How the gateway runs: everything but the contract (`GatewaySettings`), one or several engines."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..enforce.bounded import DEFAULT_LEARNER_TIMEOUT
from ..enforce.core import DispatchPolicy
from ..enforce.eviction import EvictionConfig
from ..enforce.learners import Learner
from ..enforce.rationing import ReliefConfig
from ..enforce.redline import RedlineConfig
from ..enforce.watch import DEFAULT_WATCH, WatchConfig
from ..errors import SpecError
from ..properties.table import PropertyTable
from .config import KeysConfig
from .outlier import MODELS, OutlierConfig
from .upstream import upstream_url

if TYPE_CHECKING:
    from ..fleet.credits import CreditsConfig

__all__ = ["GatewaySettings", "engine_names"]


@dataclass(frozen=True)
class GatewaySettings:
    """How the gateway runs (everything but the contract).

    Attributes:
        upstream: the OpenAI-compatible server, e.g. ``http://127.0.0.1:8000``; or several
            (engines): each ``URL`` or ``NAME=URL`` (a name defaults to the URL's host:port).
        keys: API keys, claim secret, unauthenticated policy.
        learner: the untrusted proposer (``None``: admit everything).
        learner_timeout: seconds the learner may take to answer; an overrun rejects the
            surplus with ``learner-timeout`` (the Guard's ``learner_timeout``).
        stall_threshold: seconds late that make an event-loop stall a ``stall`` trace record
            (`rvguard.enforce.stall`; ``None``: no watchdog).
        trace: JSONL file the Guard's events go to (``None``: no trace); never truncated: a restart
            on an existing trace opens its next segment (`rvguard.gateway.trace`).
        metrics_auth: ``/metrics`` asks for a credential as the API does (default: open to scrapers).
        metrics_tenant_names: label ``/metrics`` series with tenant names (False: ``tenant0``, ... in
            the contract's order, `rvguard.gateway.exposition`).
        trace_max_bytes: rotate the trace to its next segment past this size (``None``: never).
        timeout: seconds a whole upstream call may take (Guard-level).
        connect_timeout, read_timeout: upstream socket timeouts (seconds).
        deferred_drop: drop doomed requests at dispatch time (503).
        drain_timeout: seconds shutdown waits for live requests.
        watch: the assumption watch (on by default, alerting only; ``None``: off).
        send_priority: send the tier as vLLM's ``priority`` (the engine must run
            ``--scheduling-policy priority``); the gateway dispatches by tier either way.
        dispatch_policy: the core's dispatch order: ``priority`` (tier, then arrival) or
            ``fifo`` (arrival only: the study's ablation, for experiments).
        upstream_api_key: sent upstream as ``Authorization: Bearer`` (never logged).
        max_body: the largest request body accepted, in bytes (413 above).
        header_timeout, body_timeout: seconds a request's headers, then its body, may take.
        probe_interval: seconds between two readiness probes of the upstream.
        preempt_grace: seconds a preempted surplus request may still run (`Guard.preempt`).
        retry_after: the retry hint (seconds) a preempted client gets (503 ``retry-after``).
        engine_slots: C_e per engine name (default: the contract's C for each engine).
        staleness: seconds an engine's headroom view may age before routing goes siloed.
        telemetry_interval: seconds between two scrapes of an engine's ``/metrics``.
        route_seed: seed of the router's generator (``None``: from the system).
        relocations: k, the most requests relocated between engines at once (0: none).
        credits: the floor-credit pool shared with other replicas (Redis); ``None``: local.
        replica: this replica's id: namespaces its rids (``<replica>-<random tag>-g<n>``) and, with
            ``replica`` set, the clock starts at Unix time so replicas' traces merge.
        redline: the physical redline (the contract's ``headroom`` block); with ``headroom_url``
            queued surplus is demoted while it fires, running surplus preempted past its hard floor.
        headroom_url: one engine's Prometheus ``/metrics`` (`MetricsHeadroomSource`); needs
            ``redline`` and a single engine (the redline guards one node).
        headroom_interval: seconds between two scrapes of ``headroom_url`` (at least).
        eviction: the emergency eviction channel past the hard floor (the contract's ``eviction``
            block, `rvguard.enforce.eviction.eviction_config`); needs ``headroom_url``. ``None``:
            the contract's block decides (no channel stated: running surplus is preempted).
        relief: rationed relief (`rvguard.enforce.rationing.ReliefConfig`: the KV cache's tokens and
            the hold bound); needs ``headroom_url``. ``None``: rationed with the size the engine
            states (vLLM's ``vllm:cache_config_info``) once it does, else bare preemption.
        bare_preemption: never ration, even when the engine states its cache's size: past the hard
            floor every running surplus request is preempted and the redline restores every held
            one at once (the behaviour before rationing, for comparison); excludes ``relief``.
        upstream_health: the path each readiness probe asks (``GET``, 200 is healthy) before the
            model list: ``/health`` for vLLM (non-200 while its engine is dead, when
            ``/v1/models`` still answers); the default ``/v1/models`` asks nothing more.
        eject_after: failed requests in a row (5xx, transport) that take an upstream out
            (`rvguard.gateway.outlier`; 0: never).
        eject_for: seconds an ejected upstream stays out before it is tried again.
    """

    upstream: str | tuple[str, ...]
    keys: KeysConfig = field(default_factory=KeysConfig)
    learner: Learner | None = None
    learner_timeout: float = DEFAULT_LEARNER_TIMEOUT
    stall_threshold: float | None = 0.5
    trace: str | Path | None = None
    trace_max_bytes: int | None = None
    metrics_auth: bool = False
    metrics_tenant_names: bool = True
    timeout: float | None = 120.0
    connect_timeout: float = 2.0
    read_timeout: float = 60.0
    deferred_drop: bool = False
    drain_timeout: float = 10.0
    watch: WatchConfig | None = DEFAULT_WATCH
    properties: tuple[PropertyTable, ...] = ()  # a user's tables, enforced live (rvguard.enforce.gate)
    shadow: bool = False  # the tables in shadow only: alerts, never refusals (rvguard.enforce.shadow)
    send_priority: bool = True
    dispatch_policy: DispatchPolicy = "priority"
    upstream_api_key: str | None = field(default=None, repr=False)
    max_body: int = 4 * 1024 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    probe_interval: float = 5.0
    preempt_grace: float = 0.0
    retry_after: float = 1.0
    engine_slots: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    staleness: float = 2.0
    telemetry_interval: float = 0.5
    route_seed: int | None = None
    relocations: int = 2
    credits: CreditsConfig | None = None
    replica: str | None = None
    redline: RedlineConfig | None = None
    headroom_url: str | None = None
    headroom_interval: float = 1.0
    eviction: EvictionConfig | None = None
    relief: ReliefConfig | None = None
    bare_preemption: bool = False
    upstream_health: str = MODELS
    eject_after: int = 3
    eject_for: float = 10.0

    @property
    def outlier(self) -> OutlierConfig:
        """When an upstream is ejected, for how long, and its health path."""
        return OutlierConfig(self.eject_after, self.eject_for, self.upstream_health)

    @property
    def engines(self) -> tuple[tuple[str, str], ...]:
        """``(name, url)`` of each engine, in the order given."""
        return engine_names((self.upstream,) if isinstance(self.upstream, str) else self.upstream)

    def _check_headroom(self, engines: int) -> None:
        if self.headroom_url is not None and (self.redline is None or engines != 1):
            why = "a headroom block in the contract" if self.redline is None else "a single engine"
            raise SpecError(f"headroom telemetry needs {why} (the redline guards one node)", field="headroom")
        if self.eviction is not None and self.headroom_url is None:
            raise SpecError("an eviction channel needs headroom telemetry (headroom_url)", field="eviction")
        if self.relief is not None and self.headroom_url is None:
            raise SpecError("rationed relief needs headroom telemetry (headroom_url)", field="relief")
        if self.relief is not None and self.bare_preemption:
            raise SpecError("bare preemption excludes rationed relief (relief)", field="relief")

    def _check_trace(self) -> None:
        if self.trace_max_bytes is not None and self.trace_max_bytes < 1024:
            raise SpecError(
                f"trace_max_bytes must be at least 1024, got {self.trace_max_bytes!r}",
                field="trace_max_bytes",
            )

    def __post_init__(self) -> None:
        engines = self.engines
        unknown = sorted(set(self.engine_slots) - {name for name, _ in engines})
        if unknown:
            raise SpecError(
                f"engine_slots names no engine: {unknown} (engines: {[n for n, _ in engines]})",
                field="engine_slots",
            )
        for name, n in self.engine_slots.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise SpecError(
                    f"engine {name!r}: slots must be an integer >= 1, got {n!r}", field="engine_slots"
                )
        if (
            isinstance(self.relocations, bool)
            or not isinstance(self.relocations, int)
            or self.relocations < 0
        ):
            raise SpecError(
                f"relocations must be an integer >= 0, got {self.relocations!r}", field="relocations"
            )
        self._check_headroom(len(engines))
        self._check_trace()
        _ = self.outlier  # checks eject_after, eject_for, upstream_health
        if self.credits is not None and self.replica != self.credits.replica:
            raise SpecError("the credit pool's replica id must be the gateway's replica", field="replica")
        seconds = {
            "timeout": self.timeout,
            "connect_timeout": self.connect_timeout,
            "read_timeout": self.read_timeout,
            "drain_timeout": self.drain_timeout,
            "learner_timeout": self.learner_timeout,
            "header_timeout": self.header_timeout,
            "body_timeout": self.body_timeout,
            "probe_interval": self.probe_interval,
            "staleness": self.staleness,
            "telemetry_interval": self.telemetry_interval,
            "headroom_interval": self.headroom_interval,
        }
        for name, value in seconds.items():
            if value is None and name == "timeout":
                continue
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise SpecError(
                    f"{name} must be a positive number of seconds, got {value!r}", field=name, value=value
                )
        if isinstance(self.max_body, bool) or not isinstance(self.max_body, int) or self.max_body < 1:
            raise SpecError(
                f"max_body must be a positive number of bytes, got {self.max_body!r}", field="max_body"
            )


def engine_names(upstreams: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``(name, url)`` per ``URL`` or ``NAME=URL`` (a URL's own name is its host:port).

    Raises:
        SpecError: no engine, a bad URL, or a name given twice.
    """
    if not upstreams:
        raise SpecError("at least one upstream is needed", field="upstream")
    out: list[tuple[str, str]] = []
    for item in upstreams:
        name, sep, url = item.partition("=")
        if not sep or "://" in name:
            name, url = "", item
        url = upstream_url(url)
        parts = urlsplit(url)
        out.append(
            (name or f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}", url)
        )
    names = [n for n, _ in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecError(f"engines named twice: {twice} (name them NAME=URL)", field="upstream")
    return tuple(out)
