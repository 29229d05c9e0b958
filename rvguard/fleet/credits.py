"""Floor credits shared by several guard replicas through Redis (DESIGN §10, "shared credits").

Theory of operation
-------------------
Each replica, on each arrival of a floored tenant, runs one atomic Lua script
(``pool.lua``) on the (tenant, window) hash: it joins the pool (its reserve
R_r = its static share of B is released to the others), reports what it spent
on its own before joining, and checks-and-adds the arrival's weight. The
script grants while the window's arrivals, in the order the store ran them,
stay within B and the credit spent plus the reserves still held stays within
B. Keys expire a grace period after their window ends.

When the store is unreachable, or slower than ``timeout``, the replica
decides alone from its `ReplicaLedger`: at most R_r in a window it has not
joined, nothing in one it may have joined; in the window it starts in, it
neither spends alone nor releases its reserve (its previous life may have
spent that reserve alone). So the fleet spends at most B per tenant per
window, store up, down, slow or restarted, replicas restarted. A store that lost its
state (restart, flush) is noticed by its missing fence marker: the script
then fences the current and next window (nothing pooled there; replicas
decide alone) so counts lost with the store are never spent twice.

The refusals this costs are declared: reason ``floor-lowered`` (perhaps
entitled) rather than ``excess`` (not entitled in any order). A background
heartbeat joins the pool at each window start (so reserves are not held
longer than needed) and, while the store is away, probes it every ``probe``
seconds; the first answer puts the replica back on the shared pool.

Cost per arrival of a floored tenant: one store round trip (bounded by
``timeout``) while up, O(1) while down; memory O(tenants) here and per
(tenant, window) in the store.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal, Protocol

from pydantic import BaseModel, Field, field_validator, model_validator

from ..clock import Clock
from ..contract import Contract, CreditMode, window_index, window_start
from ..errors import MissingExtraError, StoreUnavailableError
from .ledger import ReplicaLedger

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

POOL_SCRIPT = resources.files(__package__).joinpath("pool.lua").read_text(encoding="utf-8")
_VERDICTS = frozenset({"floor", "excess", "held", "joined", "fenced"})
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
Mode = Literal["shared", "static"]


class CreditsConfig(BaseModel, frozen=True, extra="forbid"):
    """How one replica reaches the shared pool.

    ``shares`` names every replica of the fleet with its static share of each
    floor (the same map on every replica; the shares sum to at most 1).
    """

    url: str
    replica: str
    shares: dict[str, float]
    timeout: float = Field(default=0.05, gt=0.0, le=10.0)
    probe: float = Field(default=0.25, gt=0.0, le=60.0)
    prefix: str = "rvguard"

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"expected redis://HOST:PORT/DB (or rediss://, unix://), got {v!r}")
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
    last_error: str


class CreditStore(Protocol):
    """The one-method transport to the store (a test wraps it to inject faults)."""

    async def call(self, keys: Sequence[str], args: Sequence[str]) -> list[str]:
        """Run the pool script; raise `StoreUnavailableError` when the outcome is unknown."""
        ...

    async def ping(self) -> None:
        """Raise `StoreUnavailableError` unless the store answers now."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class RedisStore:
    """`CreditStore` over redis-py's asyncio client: no retries, every call bounded by ``timeout``.

    A retry could run the script twice for one arrival, so there is none: a
    failed call is an unknown outcome and the replica falls back instead.
    """

    def __init__(self, url: str, *, timeout: float) -> None:
        try:
            from redis.asyncio import Redis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:
            raise MissingExtraError("redis", "fleet") from None
        self._timeout = timeout
        self._client = Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
        )
        self._script = self._client.register_script(POOL_SCRIPT)

    async def call(self, keys: Sequence[str], args: Sequence[str]) -> list[str]:
        """Run the pool script once."""
        reply = await self._bounded(self._script(keys=list(keys), args=list(args)))
        if not (isinstance(reply, list) and len(reply) == 4 and reply[0] in _VERDICTS):
            raise StoreUnavailableError(f"the pool script answered {reply!r}")
        return [str(x) for x in reply]

    async def ping(self) -> None:
        """One PING: no side effect, so a lost answer costs nothing."""
        await self._bounded(self._client.ping())

    async def aclose(self) -> None:
        """Close the client and its pool."""
        await self._client.aclose()

    async def _bounded(self, op: Awaitable[object]) -> object:
        from redis.exceptions import RedisError

        try:
            async with asyncio.timeout(self._timeout):
                return await op
        except (RedisError, OSError, TimeoutError) as err:
            raise StoreUnavailableError(f"{type(err).__name__}: {err}", maybe_run=not _refused(err)) from err


def _refused(err: BaseException) -> bool:
    """True when the connection was refused: the command never left this process."""
    seen: BaseException | None = err
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class SharedCredits:
    """One replica's side of the shared floor-credit pool (see module doc).

    Args:
        contract: the contract whose floors are pooled.
        config: the store, this replica's id and every replica's share.
        store: the transport (`RedisStore` for real use).
        now: the replica's start time (its window counts as joined: see `ReplicaLedger`).
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
        self._up = True
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._last_error = ""

    @classmethod
    def open(cls, contract: Contract, config: CreditsConfig, *, now: float) -> SharedCredits:
        """Connect to ``config.url`` with redis-py (lazily: the first call opens the socket)."""
        return cls(contract, config, RedisStore(config.url, timeout=config.timeout), now=now)

    @property
    def up(self) -> bool:
        """True while the replica spends through the shared pool."""
        return self._up

    def window(self, t: float) -> int:
        """The contract window holding ``t``."""
        return window_index(t, self._origin, self.contract.window)

    async def spend(self, tenant: str, weight: float, now: float) -> CreditDecision:
        """Decide the floor credit of one arrival of floored ``tenant`` at ``now``.

        Raises:
            KeyError: ``tenant`` holds no floor.
        """
        if tenant not in self._floors:
            raise KeyError(f"tenant {tenant!r} holds no floor: only floored tenants spend credit")
        k = self.window(now)
        self._ledger.arrive(tenant, k, weight)
        if self._up:
            reply = await self._call(tenant, k, weight, now)
            if reply is not None:
                return self._shared(reply, k)
        return self._static(tenant, k, weight)

    async def heartbeat(self, now: float) -> None:
        """Join every floored tenant's pool for ``now``'s window; while down, probe the store."""
        if not self._up:
            try:
                await self._store.ping()
            except StoreUnavailableError as err:
                self._last_error = str(err)
                return
            self._up = True
            log.warning("shared credits: the store answers again; back to the shared pool")
        k = self.window(now)
        for tenant in self._floors:
            if self._up:
                await self._call(tenant, k, None, now)

    async def run(self, clock: Clock, *, sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        """Heartbeat forever: at each window start, and every ``probe`` seconds while down."""
        while True:
            now = clock.now()
            await self.heartbeat(now)
            nxt = window_start(self.window(now) + 1, self._origin, self.contract.window) - now
            await sleep(max(min(nxt, self.config.probe) if not self._up else nxt, 1e-3))

    async def aclose(self) -> None:
        """Close the store's connections."""
        await self._store.aclose()

    def statistics(self) -> CreditsStatistics:
        """The counters now, as a frozen record."""
        return CreditsStatistics(up=self._up, last_error=self._last_error, **self._counts)

    # -- internals ---------------------------------------------------------------
    async def _call(self, tenant: str, k: int, weight: float | None, now: float) -> list[str] | None:
        """One script run (``weight`` None: join only); ``None`` when the store did not decide."""
        spent, arrived = self._ledger.sending(tenant, k)
        end = window_start(k + 1, self._origin, self.contract.window)
        ttl_ms = max(int((end - now + self._grace) * 1000), 1)
        cfg = self.config
        keys = (f"{cfg.prefix}:pool:{tenant}:{k}", f"{cfg.prefix}:fence")
        w, op = ("0", "0") if weight is None else (repr(weight), "1")
        release = "0" if k <= self._start else "1"  # the start window's reserve stays held
        args = [
            cfg.replica,
            repr(self._reserves[tenant]),
            repr(self._totals[tenant]),
            repr(self._floors[tenant]),
        ]
        args += [w, str(k), str(ttl_ms), repr(spent), repr(arrived), op, release]
        try:
            reply = await self._store.call(keys, args)
        except StoreUnavailableError as err:
            self._ledger.answered(tenant, k, joined=None if err.maybe_run else False)
            self._fall_back(err)
            return None
        fenced = reply[0] == "fenced"
        self._ledger.answered(tenant, k, joined=not fenced)
        if fenced:
            self._counts["fenced"] += 1
            return None
        return reply

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

    def _static(self, tenant: str, k: int, weight: float) -> CreditDecision:
        reason = self._ledger.spend_static(tenant, k, weight)
        key = {"": "static_grants", "excess": "refused_excess"}.get(reason, "refused_lowered")
        self._counts[key] += 1
        return CreditDecision(not reason, reason, "static", k)


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
