"""Helpers for the shared-pool tests: a contract, replicas on a real Redis, injected faults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rvguard.contract import Contract, contract_from_mapping
from rvguard.errors import StoreUnavailableError
from rvguard.fleet.credits import CreditsConfig, RedisStore, SharedCredits


def pool_contract(floor: int = 4, *, credit: str = "count", window: float = 1.0) -> Contract:
    """One floored tenant ``gold`` (B = ``floor``) and an unfloored one."""
    data: dict[str, Any] = {
        "epoch": 0.0,
        "window": window,
        "slots": 4,
        "output_cap": 32,
        "credit": credit,
        "service": {"s_max": 0.5, "s_max_opp": 0.5, "lower": 0.1},
        "tenants": {
            "gold": {"floor": floor, "deadline": 2.0, "tier": 0},
            "free": {"floor": 0, "deadline": 4.0, "tier": 1},
        },
    }
    if credit == "tokens":
        data["token_weights"] = {"prompt": 0.0, "output": 1.0}
    return contract_from_mapping(data)


class FaultyStore:
    """A real `RedisStore` behind a switch: ``up``, ``down`` (not run), ``late`` (run, answer lost),
    ``calls`` (PING and the name lease answer, pool calls are not run)."""

    def __init__(self, inner: RedisStore) -> None:
        self.inner = inner
        self.mode = "up"

    async def call(self, keys: Sequence[str], args: Sequence[str]) -> list[str]:
        if self.mode in ("down", "calls"):  # calls: the lease answers, the pool script does not
            raise StoreUnavailableError("injected: unreachable", maybe_run=False)
        reply = await self.inner.call(keys, args)
        if self.mode == "late":
            raise StoreUnavailableError("injected: the answer came too late")
        return reply

    async def lease(self, key: str, holder: str, ms: int, *, claim: bool) -> str:
        if self.mode == "down":
            raise StoreUnavailableError("injected: unreachable", maybe_run=False)
        reply = await self.inner.lease(key, holder, ms, claim=claim)
        if self.mode == "late":
            raise StoreUnavailableError("injected: the answer came too late")
        return reply

    async def ping(self) -> None:
        if self.mode not in ("up", "calls"):
            raise StoreUnavailableError(f"injected: {self.mode}")
        await self.inner.ping()

    async def aclose(self) -> None:
        await self.inner.aclose()


def replica(
    contract: Contract,
    url: str,
    name: str,
    shares: Mapping[str, float],
    *,
    now: float,
    prefix: str = "t",
    timeout: float = 0.5,
    lease: float = 30.0,
) -> tuple[SharedCredits, FaultyStore]:
    """One replica's pool client over a faulty-switchable store (a name lease of ``lease`` s)."""
    cfg = CreditsConfig(
        url=url, replica=name, shares=dict(shares), timeout=timeout, prefix=prefix, lease=lease
    )
    store = FaultyStore(RedisStore(url, timeout=timeout))
    return SharedCredits(contract, cfg, store, now=now), store
