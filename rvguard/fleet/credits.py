"""Floor credits shared by several guard replicas through Redis (DESIGN §10, "shared credits").

Theory of operation
-------------------
Each replica, on each arrival of a floored tenant, runs one atomic Lua script
(``pool.lua``) on the (tenant, window) hash: it reports what it spent on its
own in that window, confirms the window once it has had an answer there (its
reserve R_r = its static share of B is then released to the others), and
checks-and-adds the arrival's weight. The script grants while the window's
arrivals, in the order the store ran them, stay within B and the credit
spent plus the reserves still held stays within B. Keys expire a grace
period after their window ends.

A background heartbeat joins and confirms the *next* window shortly before
it opens (``lead``), so a burst at a window's start finds the whole pool.

When the store is unreachable, or slower than ``timeout``, the replica
decides alone from its `ReplicaLedger`: up to R_r in a window where it has
had no answer from the pool (a lost or late call releases nothing), nothing
in one where it has; in the window it starts in and the next it spends
nothing alone (its previous life may have). So the fleet spends at most B
per tenant per window, store up, down, slow or restarted, replicas
restarted. A store that lost its state (restart, flush) is noticed by its
missing fence marker: the script then fences the windows up to the one
holding the call's send time plus the lease margin (time-out, twice the skew
bound, lead), where every grant the lost state held was made (nothing pooled
there; replicas decide alone) so counts lost with the store are never spent
twice.

Before pooling, `SharedCredits.warm` connects, loads the script and checks
the pool's assumptions (`rvguard.fleet.store`): it refuses to pool (static
share only, or nothing for a duplicate name) and says why in `refusal`.

The refusals this costs are declared: reason ``floor-lowered`` (perhaps
entitled) rather than ``excess`` (not entitled in any order). While the
store is away the heartbeat probes it every ``probe`` seconds; the first
answer, once the store's facts pass the same checks as at start (a replica that
started during an outage has not seen them; a restarted store may run another
configuration), puts the replica back on the shared pool.

Cost per arrival of a floored tenant: one store round trip (bounded by
``timeout``) while up, O(1) while down; memory O(tenants) here and per
(tenant, window) in the store.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, Field, field_validator, model_validator

from ..clock import Clock
from ..contract import Contract, CreditMode, window_index, window_start
from ..errors import StoreUnavailableError
from .ledger import ReplicaLedger
from .store import POOL_SCRIPT, RedisStore, StoreFacts, redact

__all__ = [
    "POOL_SCRIPT",
    "CreditDecision",
    "CreditStore",
    "CreditsConfig",
    "CreditsStatistics",
    "RedisStore",
    "SharedCredits",
    "reserves_of",
]

log = logging.getLogger("rvguard.fleet")

_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
Mode = Literal["shared", "static"]
SAFE_POLICY = "noeviction"


class CreditsConfig(BaseModel, frozen=True, extra="forbid"):
    """How one replica reaches the shared pool.

    ``shares`` names every replica of the fleet with its static share of each
    floor (the same map on every replica; the shares sum to at most 1).
    ``max_skew`` bounds this replica's clock against the store's TIME;
    ``lease`` is how long its name is held without a heartbeat.
    """

    url: str
    replica: str
    shares: dict[str, float]
    timeout: float = Field(default=0.25, gt=0.0, le=10.0)  # a busy host: 0.05 lost windows
    probe: float = Field(default=0.25, gt=0.0, le=60.0)
    prefix: str = "rvguard"
    username: str | None = Field(default=None, repr=False)
    password: str | None = Field(default=None, repr=False)
    max_skew: float = Field(default=0.25, gt=0.0, le=60.0)
    lease: float = Field(default=30.0, gt=0.0, le=3600.0)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"expected redis://HOST:PORT/DB (or rediss://, unix://), got {redact(v)!r}")
        return v

    @field_validator("shares")
    @classmethod
    def _shares(cls, v: dict[str, float]) -> dict[str, float]:
        for name, share in v.items():
            if not _ID.match(name):
                raise ValueError(f"replica id {name!r}: use 1-64 of A-Z a-z 0-9 _ . -")
            if not (math.isfinite(share) and 0.0 <= share <= 1.0):
                raise ValueError(f"share of {name!r} must lie in [0, 1], got {share!r}")
        if sum(v.values()) > 1.0 + 1e-9:
            raise ValueError(f"shares sum to {sum(v.values()):.6g} > 1: the fleet could spend more than B")
        return v

    @model_validator(mode="after")
    def _replica_known(self) -> CreditsConfig:
        if self.replica not in self.shares:
            raise ValueError(f"replica {self.replica!r} is not among the shares {sorted(self.shares)}")
        return self

    @property
    def safe_url(self) -> str:
        """The URL with its credentials redacted (for logs)."""
        return redact(self.url)


@dataclass(frozen=True, slots=True)
class CreditDecision:
    """The pool's answer for one arrival of a floored tenant.

    ``reason`` is empty when granted, else ``excess`` or ``floor-lowered``;
    ``arrived`` is the window's arrival weight in pool order, this one
    included (shared mode only).
    """

    granted: bool
    reason: str
    mode: Mode
    window: int
    arrived: float | None = None

    def trace_fields(self) -> dict[str, object]:
        """Fields for the arrive event, so a merged trace can be judged in pool order."""
        out: dict[str, object] = {"credit": self.mode}
        if self.arrived is not None:
            out["pool_arrived"] = self.arrived
        return out


_COUNTERS = (
    "shared_grants",
    "static_grants",
    "refused_excess",
    "refused_lowered",
    "fenced",
    "store_errors",
    "outages",
    "invalid",
)


@dataclass(frozen=True, slots=True)
class CreditsStatistics:
    """The pool's counters now (trio-style ``statistics()``)."""

    up: bool
    shared_grants: int
    static_grants: int
    refused_excess: int
    refused_lowered: int
    fenced: int
    store_errors: int
    outages: int
    invalid: int
    last_error: str
    refusal: str


class CreditStore(Protocol):
    """The transport to the store (a test wraps it to inject faults)."""

    async def call(self, keys: Sequence[str], args: Sequence[str]) -> list[str]:
        """Run the pool script; raise `StoreUnavailableError` when the outcome is unknown."""
        ...

    async def ping(self) -> None:
        """Raise `StoreUnavailableError` unless the store answers now."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class SharedCredits:
    """One replica's side of the shared floor-credit pool (see module doc).

    Args:
        contract: the contract whose floors are pooled.
        config: the store, this replica's id and every replica's share.
        store: the transport (`RedisStore` for real use).
        now: the replica's start time (see `ReplicaLedger` for its start window).
        origin: the window origin (default: the contract's epoch).
    """

    def __init__(
        self,
        contract: Contract,
        config: CreditsConfig,
        store: CreditStore,
        *,
        now: float,
        origin: float | None = None,
    ) -> None:
        self.contract = contract
        self.config = config
        self._store = store
        self._origin = contract.epoch if origin is None else origin
        floors = {n: float(t.floor) for n, t in contract.floored_tenants.items()}
        reserves = {n: _reserve(contract, b, config.shares[config.replica]) for n, b in floors.items()}
        shares = config.shares.values()
        self._totals = {n: sum(_reserve(contract, b, s) for s in shares) for n, b in floors.items()}
        self._reserves = reserves
        self._floors = floors
        self._start = self.window(now)
        self._ledger = ReplicaLedger(reserves, floors, start_window=self._start)
        self._grace = max(2.0 * contract.window, 10.0)
        self.lead = min(0.25 * contract.window, 1.0)
        self._up = True
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._last_error = ""
        self._refusal = ""
        self._duplicate = False
        self._held = False
        self._ready = False
        if getattr(store, "lease", None) is not None:
            self._ledger.leased(-math.inf)  # no lease yet: nothing alone until the first renewal
        bound = min(config.max_skew, contract.window / 4)
        self._margin = config.timeout + 2 * bound + self.lead
        self.lease = max(config.lease, 3 * contract.window + self._margin)  # at least three windows
        self._others = [r for r in config.shares if r != config.replica and not r.startswith("_")]
        self._life = secrets.token_hex(8)
        self._clock: Callable[[], float] | None = None  # the replica's clock, once `warm` or `run` gave it
        self._warmed: Callable[[], float] | None = None  # the clock `warm` was given (Unix time)

    @classmethod
    def open(cls, contract: Contract, config: CreditsConfig, *, now: float) -> SharedCredits:
        """A pool over redis-py (call `warm` before serving: it connects and checks)."""
        store = RedisStore(
            config.url, timeout=config.timeout, username=config.username, password=config.password
        )
        return cls(contract, config, store, now=now)

    @property
    def up(self) -> bool:
        """True while the replica spends through the shared pool."""
        return self._up and not self._refusal

    @property
    def refusal(self) -> str:
        """Why this replica refuses to pool (empty when it pools)."""
        return self._refusal

    def window(self, t: float) -> int:
        """The contract window holding ``t``."""
        return window_index(t, self._origin, self.contract.window)

    def readiness(self) -> str:
        """Empty once the pool has delivered a confirmed window and pools now, else why not (``/readyz``).

        A store outage after that does not make the replica unready: it serves
        on its static share (the designed fallback); ``statistics().up`` says so.
        """
        if self._refusal:
            return self._refusal
        if not self._ready:
            why = f": {self._last_error}" if self._last_error else ""
            return f"not yet joined the shared credit pool{why}"
        return ""

    async def warm(self, clock: Callable[[], float]) -> None:
        """Connect, load the script, check the store's assumptions and join the pool (before serving).

        ``clock`` is the replica's clock (read right after the store's TIME, for the skew check).
        """
        self._clock = self._warmed = clock
        if getattr(self._store, "warm", None) is not None:
            try:
                await self._check()
            except StoreUnavailableError as err:
                self._fall_back(err)  # checked when it first answers (`heartbeat`)
                return
            if self._refusal:
                return
        await self.heartbeat(clock())

    async def spend(self, tenant: str, weight: float, now: float) -> CreditDecision:
        """Decide the floor credit of one arrival of floored ``tenant`` at ``now``.

        Raises:
            KeyError: ``tenant`` holds no floor.
        """
        if tenant not in self._floors:
            raise KeyError(f"tenant {tenant!r} holds no floor: only floored tenants spend credit")
        k = self.window(now)
        position = self._ledger.arrive(tenant, k, weight)
        if self._duplicate:
            self._counts["refused_lowered"] += 1
            return CreditDecision(False, "floor-lowered", "static", k)
        if self.up:
            reply = await self._call(tenant, k, weight, now)
            if reply is not None:
                return self._shared(reply, k)
        return self._static(tenant, k, weight, position)

    async def heartbeat(self, now: float) -> None:
        """Renew the name lease; join and confirm this window and, within ``lead`` of it, the next."""
        if self._refusal:
            return
        if not self._up:
            try:
                await self._check()
            except StoreUnavailableError as err:
                self._last_error = str(err)
                return
            if self._refusal:
                return
            self._up = True
            log.warning("shared credits: the store answers again; back to the shared pool")
        if not await self._renew(now):
            return
        k = self.window(now)
        soon = now >= window_start(k + 1, self._origin, self.contract.window) - self.lead
        for kk in (k + 1, k) if soon else (k,):  # the next window first: its join is the one due
            for tenant in self._floors:
                if self._up and not self._ledger.confirmed(tenant, kk):
                    await self._call(tenant, kk, None, now)
                    if (
                        self._up
                        and not self._ledger.confirmed(tenant, kk)
                        and self._ledger.sending(tenant, kk)[2]
                    ):
                        await self._call(tenant, kk, None, now)
        self._ready = self._ready or all(self._ledger.confirmed(t, k) for t in self._floors)

    async def run(self, clock: Clock, *, sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        """Heartbeat forever: ``lead`` before each window start and at it; every ``probe`` s while down."""
        self._clock = clock.now
        while True:
            await self.heartbeat(clock.now())
            now = clock.now()  # after it: a slow heartbeat must not push the next join ahead past its window
            nxt = window_start(self.window(now) + 1, self._origin, self.contract.window)
            wake = nxt - self.lead if now < nxt - self.lead else nxt
            pause = wake - now
            if not self._up:
                pause = min(pause, self.config.probe)
            await sleep(max(pause, 1e-3))

    async def aclose(self) -> None:
        """Close the store's connections."""
        await self._store.aclose()

    def statistics(self) -> CreditsStatistics:
        """The counters now, as a frozen record."""
        return CreditsStatistics(
            up=self.up, last_error=self._last_error, refusal=self._refusal, **self._counts
        )

    # -- internals ---------------------------------------------------------------
    async def _check(self) -> None:
        """Read the store's facts and refuse to pool when they forbid it (`_refuse`).

        At start and whenever the store answers again after an outage: a replica that
        started while the store was away has not seen them yet, and a restarted store
        may run another configuration. A store without ``warm``, or a replica never
        warmed (no clock of Unix time to compare), is pinged only.

        Raises:
            StoreUnavailableError: the store did not answer.
        """
        warm, clock = getattr(self._store, "warm", None), self._warmed
        if warm is None or clock is None:
            await self._store.ping()
            return
        facts: StoreFacts = await warm()
        self._refusal = _refuse(facts, clock(), min(self.config.max_skew, self.contract.window / 4))
        if self._refusal:
            log.error("shared credits: refusing to pool: %s", self._refusal)

    async def _renew(self, now: float) -> bool:
        """Claim or renew this replica's name lease; False (and a refusal) once another process took it."""
        lease = getattr(self._store, "lease", None)
        if lease is None:
            return True
        key, ms = self._name_key(self.config.replica), int(self.lease * 1000)
        try:
            holder = await lease(key, self._life, ms, claim=not self._held)
        except StoreUnavailableError as err:
            self._fall_back(err)
            return False
        if holder.startswith("+"):  # claimed: a start window until the old holder's lease is over
            self._held = True
            self._ledger.rejoined(self.window(now + float(holder[1:]) / 1000.0))
            holder = self._life
        if holder == self._life:  # covered: windows that end a margin before the lease does
            self._ledger.leased(self.window(now + self.lease - self._margin) - 1)
            return True
        if not self._duplicate:
            log.error("shared credits: replica name %r was taken by another process", self.config.replica)
        self._duplicate = True
        self._refusal = (
            f"replica name {self.config.replica!r} was taken by another live process: "
            "two replicas share it; this one spends no floor credit until restarted"
        )
        return False

    def _name_key(self, replica: str) -> str:
        return f"{self.config.prefix}:name:{replica}"

    async def _call(self, tenant: str, k: int, weight: float | None, now: float) -> list[str] | None:
        """One script run (``weight`` None: join only); ``None`` when the store did not decide."""
        spent, arrived, confirm = self._ledger.sending(tenant, k)
        end = window_start(k + 1, self._origin, self.contract.window)
        ttl_ms = max(int((end - now + self._grace) * 1000), 1)
        cfg = self.config
        keys = [f"{cfg.prefix}:pool:{tenant}:{k}", f"{cfg.prefix}:fence"]
        w, op = ("0", "0") if weight is None else (repr(weight), "1")
        args = [
            cfg.replica,
            repr(self._reserves[tenant]),
            repr(self._totals[tenant]),
            repr(self._floors[tenant]),
        ]
        args += [w, str(k), str(ttl_ms), repr(spent), repr(arrived), op, "1" if confirm else "0"]
        sent = now if self._clock is None else max(now, self._clock())  # a stalled loop sends late
        args.append(str(self.window(sent + self._margin)))  # a lost state's grants: made by then
        if getattr(self._store, "lease", None) is not None:  # the others' leases: lapsed reserves return
            keys += [self._name_key(r) for r in self._others]
            for r in self._others:
                args += [r, repr(_reserve(self.contract, self._floors[tenant], cfg.shares[r]))]
        try:
            reply = await self._store.call(keys, args)
        except StoreUnavailableError as err:
            self._fall_back(err)
            return None
        verdict = reply[0]
        pooled = verdict not in ("fenced", "invalid")
        self._ledger.answered(tenant, k, pooled=pooled, confirmed=confirm)
        if verdict == "fenced":
            self._counts["fenced"] += 1
        elif verdict == "invalid":
            self._counts["invalid"] += 1
            self._last_error = f"the pool of {tenant!r} in window {k} holds impossible values ({reply[3]})"
            log.error("shared credits: %s; refused, spending the static share", self._last_error)
        return reply if pooled else None

    def _fall_back(self, err: StoreUnavailableError) -> None:
        self._counts["store_errors"] += 1
        self._last_error = str(err)
        if self._up:
            self._up = False
            self._counts["outages"] += 1
            log.warning("shared credits: store unavailable (%s); spending the static share only", err)

    def _shared(self, reply: list[str], k: int) -> CreditDecision:
        verdict, arrived = reply[0], float(reply[1])
        if verdict == "floor":
            self._counts["shared_grants"] += 1
            return CreditDecision(True, "", "shared", k, arrived)
        reason = "excess" if verdict == "excess" else "floor-lowered"
        self._counts["refused_excess" if verdict == "excess" else "refused_lowered"] += 1
        return CreditDecision(False, reason, "shared", k, arrived)

    def _static(self, tenant: str, k: int, weight: float, position: float) -> CreditDecision:
        reason = self._ledger.spend_static(tenant, k, weight, position)
        key = {"": "static_grants", "excess": "refused_excess"}.get(reason, "refused_lowered")
        self._counts[key] += 1
        return CreditDecision(not reason, reason, "static", k)


def _refuse(facts: StoreFacts, now: float, bound: float) -> str:
    """Why the store's facts forbid pooling, or empty."""
    if facts.policy != SAFE_POLICY:
        return (
            f"the store's maxmemory-policy is {facts.policy}, which may evict credit state: "
            f"set maxmemory-policy {SAFE_POLICY}; spending the static share only"
        )
    skew = abs(now - facts.time) - facts.rtt
    if skew > bound:
        return (
            f"this replica's clock is {now - facts.time:+.3f} s off the store's TIME "
            f"(bound {bound:g} s): fix its clock (NTP); spending the static share only"
        )
    return ""


def _reserve(contract: Contract, floor: float, share: float) -> float:
    """A replica's static share of ``floor``, in credits (whole credits with count credits)."""
    r = floor * share
    return float(math.floor(r + 1e-9)) if contract.credit is CreditMode.COUNT else r


def reserves_of(contract: Contract, shares: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Every replica's reserve per floored tenant (what each may spend with the store away)."""
    return {
        r: {n: _reserve(contract, float(t.floor), s) for n, t in contract.floored_tenants.items()}
        for r, s in shares.items()
    }
