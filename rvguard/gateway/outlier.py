"""Passive health of each upstream: consecutive failed requests take it out; a trial brings it back.

Theory of operation
-------------------
A readiness probe that asks ``GET /v1/models`` can be lied to: a vLLM server whose engine
process died (``EngineDeadError``) still lists its models while every completion answers 500.
So each upstream (the single upstream of a gateway, each engine of a fleet) also has an
`Outlier`, told the outcome of every real request sent to it (`UpstreamDispatcher.dispatch`),
as Envoy's outlier detection (``consecutive_5xx``) is:

* a 5xx answer, an error in the stream, a transport failure (refused, reset, cut) or an
  upstream time-out is a *failure*; ``after`` failures in a row (`OutlierConfig`, default 3)
  *eject* the upstream. A success or a 4xx (the upstream answered: the client's mistake)
  resets the count; a request the client or the Guard cancelled counts for nothing;
* ejected, the upstream is out: a fleet's router places nothing on it
  (`rvguard.gateway.engines.Engine.in_rotation`); a single-upstream gateway answers
  ``/readyz`` 503 naming the reason (requests that still come are still forwarded: there
  is nowhere else, and one that succeeds brings the upstream back);
* a probe that answers does not bring it back: that is the lie. After ``eject_for``
  seconds the upstream is *due* and the next probe that answers tries it once (half-open):
  with the default health path (``/v1/models``) the gateway sends a *trial* completion of
  its own (``max_tokens`` 1, to a model the upstream lists, on the endpoint that failed)
  and a 200 brings the upstream back; with a health path set (``/health`` for vLLM, which
  answers 503 while its engine is dead) that path's 200 does. A failed try keeps it out
  twice as long as the last time (at most `EJECT_CAP_S`); a real request that succeeds
  brings it back at once;
* every ejection and every return is said three ways: a trace ``alert`` record
  (condition ``upstream-ejected`` / ``upstream-restored``, with ``engine``, ``value``: the
  failures in a row, ``bound``: ``after``, ``detail``: the last failure), a log line
  (``upstream_ejected`` at WARNING, ``upstream_restored`` at INFO) and ``/metrics``
  (``rvguard_upstream_ejected{engine}``: 1 while out, ``rvguard_upstream_ejections_total{engine}``).
  No property of the contract reads these records: an ejection is no precondition the
  checker judges SF against (`rvguard.attribution` skips them).

A tenant that can make the engine answer 500 on purpose can take it out for ``eject_for``
seconds at a time (three such requests in a row, with no success between); the gateway's own
trial brings it back. Cost: O(1) per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ..clock import Clock
from ..errors import DispatchError, SpecError
from ..watch_events import UPSTREAM_EJECTED, UPSTREAM_RESTORED, Watch

if TYPE_CHECKING:
    from .trace import TraceFile


class Upstream(Protocol):
    """What an outlier asks of its upstream's client (`rvguard.gateway.upstream.UpstreamDispatcher`)."""

    outlier: Outlier | None

    async def get_json(
        self, path: str, post: Mapping[str, Any] | None = None, *, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        """GET ``path``, or POST ``post`` to it: the status and the JSON answer."""
        ...

    async def status_of(self, path: str) -> int:
        """The status of ``GET path``."""
        ...

    async def models(self) -> list[str]:
        """The model ids the upstream lists."""
        ...


__all__ = [
    "EJECT_CAP_S",
    "MODELS",
    "Outlier",
    "OutlierConfig",
    "OutlierLog",
    "OutlierReport",
    "Upstream",
    "healthy",
    "probe",
    "trial",
    "watch_outliers",
]

log = logging.getLogger("rvguard.gateway")
#: the default health path: the model list (which a dead vLLM engine still answers)
MODELS = "/v1/models"
#: the longest an upstream stays out before it is tried again (seconds)
EJECT_CAP_S = 300.0
#: seconds the gateway's trial completion may take
TRIAL_S = 10.0


@dataclass(frozen=True, slots=True)
class OutlierConfig:
    """When an upstream is taken out, for how long, and what says it is healthy (module doc).

    Attributes:
        after: failed requests in a row that eject it (0: never ejected).
        eject_for: seconds it stays out before the first try (doubled after each failed try).
        health: the path a probe asks (``GET``; 200 is healthy); ``/v1/models`` (the default)
            is also the model list. ``/health`` for vLLM; not for a LiteLLM proxy, whose
            ``/health`` calls every model it routes to.
    """

    after: int = 3
    eject_for: float = 10.0
    health: str = MODELS

    def __post_init__(self) -> None:
        if isinstance(self.after, bool) or not isinstance(self.after, int) or self.after < 0:
            raise SpecError(f"eject_after must be an integer >= 0, got {self.after!r}", field="eject_after")
        e = self.eject_for
        if isinstance(e, bool) or not isinstance(e, int | float) or not (math.isfinite(e) and e > 0):
            raise SpecError(f"eject_for must be a positive number of seconds, got {e!r}", field="eject_for")
        if not (isinstance(self.health, str) and self.health.startswith("/")) or any(
            c.isspace() for c in self.health
        ):
            raise SpecError(
                f"the upstream health path must start with / and hold no space, got {self.health!r}",
                field="upstream_health",
            )


#: told each change: the outlier, and True when it was just ejected (False: it is back)
OutlierReport = Callable[["Outlier", bool], None]


class Outlier:
    """One upstream's passive health (module doc).

    Args:
        name: the upstream's name (an engine's, or the single upstream's host:port).
        config: when to eject, for how long, the health path.
        clock: the gateway's clock (ejection times, trace records).
    """

    def __init__(self, name: str, config: OutlierConfig, clock: Clock) -> None:
        self.name = name
        self.config = config
        self.clock = clock
        self.consecutive = 0  # failed requests in a row
        self.ejected = False
        self.reason = ""  # why it is out (the last failure), or why it came back
        self.ejections = 0  # since start (/metrics)
        self.strikes = 0  # ejections and failed tries since it was last in
        self.retry_at = 0.0
        self.path = "/v1/completions"  # of the last failed request: the trial's
        self.report: OutlierReport | None = None
        self._trial: asyncio.Task[None] | None = None

    # -- real requests -------------------------------------------------------------
    def succeeded(self) -> None:
        """A real request to it was answered whole."""
        self.consecutive = 0
        if self.ejected:
            self._restore("a request succeeded")

    def failed(self, err: DispatchError, path: str) -> None:
        """A real request to it failed with ``err``: a failure unless the upstream blamed the client."""
        if err.status_hint < 500:  # it answered: the client's mistake (or a limit) is no sign of death
            self.consecutive = 0
            return
        self.consecutive += 1
        self.path = path
        if self.config.after and not self.ejected and self.consecutive >= self.config.after:
            self.strikes = 0
            self._eject(str(err) or type(err).__name__)

    def _eject(self, why: str) -> None:
        self.ejected = True
        self.ejections += 1
        n = self.consecutive
        self.reason = f"{n} failed request{'s' if n > 1 else ''} in a row, the last: {why}"
        self._backoff()
        if self.report is not None:
            self.report(self, True)

    def _backoff(self) -> None:
        self.strikes += 1
        cap = max(EJECT_CAP_S, self.config.eject_for)
        self.retry_at = self.clock.now() + min(self.config.eject_for * 2 ** min(self.strikes - 1, 30), cap)

    def _restore(self, why: str) -> None:
        self.ejected = False
        self.consecutive = self.strikes = 0
        self.reason = why
        if self.report is not None:
            self.report(self, False)

    # -- half-open -------------------------------------------------------------------
    def due(self) -> bool:
        """Out, and its time out is over: the next probe that answers tries it."""
        return self.ejected and self.clock.now() >= self.retry_at

    def probed(self, dispatcher: Upstream, models: Sequence[str]) -> None:
        """A probe of it answered (its health path said 200): try it when due. With a health
        path set, that answer is the try; else a trial completion is sent (in the background)."""
        if not self.due() or (self._trial is not None and not self._trial.done()):
            return
        if self.config.health != MODELS:
            self._restore(f"GET {self.config.health} answered 200")
        else:
            self._trial = asyncio.ensure_future(self._try(dispatcher, models))

    async def _try(self, dispatcher: Upstream, models: Sequence[str]) -> None:
        try:
            async with asyncio.timeout(TRIAL_S):
                ok, why = await trial(dispatcher, models, self.path)
        except TimeoutError:
            ok, why = False, f"trial: no answer in {TRIAL_S:g} s"
        except DispatchError as err:
            ok, why = False, f"trial: {err}"
        if not self.ejected:
            return  # a real request brought it back meanwhile
        if ok:
            self._restore(why)
            return
        self._backoff()
        self.reason = why
        log.warning(
            "upstream %s stays out: %s (next try in %.3g s)",
            self.name,
            why,
            self.retry_at - self.clock.now(),
            extra={"event": "upstream_still_ejected", "engine": self.name, "reason": why},
        )

    async def aclose(self) -> None:
        """Stop a trial under way."""
        if self._trial is not None:
            self._trial.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._trial


#: the trial's prompt: several tokens, because a fresh vLLM 0.32 CPU engine whose first request had a
#: one-token prompt lost its worker (EngineDeadError) five times in five here, and a restarted engine
#: meets the trial first
TRIAL_PROMPT = "Is the engine serving requests again after its restart?"


async def trial(dispatcher: Upstream, models: Sequence[str], path: str) -> tuple[bool, str]:
    """One completion of the gateway's own (``max_tokens`` 1) on ``path`` (``/v1/completions`` or
    ``/v1/chat/completions``): did the upstream serve it?"""
    if not models:
        return False, "trial: the upstream lists no model"
    body: dict[str, Any] = {"model": models[0], "max_tokens": 1, "stream": False}
    if path.endswith("/chat/completions"):
        body["messages"] = [{"role": "user", "content": TRIAL_PROMPT}]
    else:
        body["prompt"] = TRIAL_PROMPT
    status, _ = await dispatcher.get_json(path, body)
    return status == 200, f"trial: POST {path} answered {status}"


async def probe(dispatcher: Upstream) -> list[str]:
    """One readiness probe of an upstream: its health path (when set) answers 200, then its model
    list; `DispatchError` when either fails. An ejected upstream that is due is tried (`Outlier.probed`)."""
    o = dispatcher.outlier
    if o is not None and o.config.health != MODELS:
        await healthy(dispatcher, o.config.health)
    models = await dispatcher.models()
    if o is not None:
        o.probed(dispatcher, models)
    return models


async def healthy(dispatcher: Upstream, path: str) -> None:
    """``GET path`` answers 200, or `DispatchError` (502; 504 when it took too long) says what it did."""
    status = await dispatcher.status_of(path)
    if status != 200:
        raise DispatchError(f"GET {path} answered {status}", status_hint=502)


class OutlierLog:
    """Says each ejection and return: a trace ``alert`` record, a log line (module doc)."""

    def __init__(self, trace: TraceFile | None, on_change: Callable[[], None] | None = None) -> None:
        self._trace = trace
        self._on_change = on_change

    def __call__(self, o: Outlier, ejected: bool) -> None:
        """Report ``o``'s change."""
        condition = UPSTREAM_EJECTED if ejected else UPSTREAM_RESTORED
        if ejected:
            how = "a trial completion" if o.config.health == MODELS else f"GET {o.config.health}"
            log.warning(
                "upstream %s ejected: %s (out for %.3g s, then tried with %s; /v1/models answering is no "
                "proof)",
                o.name,
                o.reason,
                o.retry_at - o.clock.now(),
                how,
                extra={"event": "upstream_ejected", "engine": o.name, "reason": o.reason},
            )
        else:
            log.info(
                "upstream %s back: %s",
                o.name,
                o.reason,
                extra={"event": "upstream_restored", "engine": o.name, "reason": o.reason},
            )
        if self._trace is not None:
            extra = MappingProxyType({"engine": o.name, "detail": o.reason})
            record = Watch(o.clock.now(), condition, float(o.consecutive), float(o.config.after), extra=extra)
            with contextlib.suppress(OSError):  # the trace file logged and counted it
                self._trace(record)
        if self._on_change is not None:
            self._on_change()


class _Series:
    """``rvguard_upstream_ejected{engine}`` and ``rvguard_upstream_ejections_total{engine}``."""

    def __init__(self, outliers: Sequence[Outlier]) -> None:
        self._outliers = list(outliers)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        out = GaugeMetricFamily(
            "rvguard_upstream_ejected", "1 while the upstream is out for failed requests", labels=["engine"]
        )
        total = CounterMetricFamily(
            "rvguard_upstream_ejections",
            "Times the upstream was taken out for failed requests",
            labels=["engine"],
        )
        for o in self._outliers:
            out.add_metric([o.name], float(o.ejected))
            total.add_metric([o.name], float(o.ejections))
        yield out
        yield total


def watch_outliers(upstreams: Sequence[Upstream], registry: Any, report: OutlierReport) -> list[Outlier]:
    """The outliers of ``upstreams`` (a gateway's one, or each engine's), each told to ``report``
    its changes, their series exposed in ``registry``."""
    outliers = [u.outlier for u in upstreams if u.outlier is not None]
    for o in outliers:
        o.report = report
    registry.register(_Series(outliers))
    return outliers
