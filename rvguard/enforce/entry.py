"""A request's way into the Guard: its tenant bound, its arrival stamped, its output capped.

Theory of operation
-------------------
The core decides on a `Request` whose tenant is the true one (bound from
authenticated identity, never from a learner), whose ``t`` is its arrival on
the Guard's clock and whose ``max_tokens`` is the contract's cap of what the
client asked (the request's facts, `DecisionCore.facts`). `bind` makes such a
request from what a library's caller hands `Guard.submit`: the identity bound
by the Guard's binder (no binder: the request's tenant is taken as bound), the
arrival stamped ``now``, the output capped, and a new `Request` made only
where the caller's differs. With a shared credit pool (`CreditPool`) a floored
tenant's arrival spends there first (`spend`): the pool answers after an
await, so the arrival is stamped again then, in the window the pool counted it.

Pure but for `spend`, which awaits the pool.
"""

from __future__ import annotations

from typing import Protocol

from ..clock import Clock
from ..contract import Contract
from ..facts import FactsCache
from .identity import Identity, IdentityBinder
from .request import Request

__all__ = ["POOL_TRIES", "CreditPool", "bind", "spend"]

#: answers that come back in the next window before the arrival is refused ``floor-lowered``
POOL_TRIES = 3


class CreditPool(Protocol):
    """Floor credit shared with other guard replicas (the gateway wraps `rvguard.fleet.credits`)."""

    def window(self, t: float) -> int:
        """The contract window holding ``t``."""
        ...

    async def spend(self, rid: str, tenant: str, weight: float, now: float) -> tuple[int, str]:
        """Spend ``weight`` of ``tenant``'s floor in ``now``'s window: ``(window, "")`` when granted,
        else ``(window, reason)``; never raises for an unreachable store (it decides alone)."""
        ...


def bind(
    request: Request,
    identity: Identity | None,
    binder: IdentityBinder | None,
    facts: FactsCache,
    contract: Contract,
    now: float,
) -> Request | None:
    """``request`` bound (``binder``'s tenant for ``identity``; none: its own), stamped ``now`` and
    capped from its ``facts``; the request itself when it already was; ``None``: refused by the binder."""
    tenant = request.tenant if binder is None else binder.bind(identity).tenant
    if tenant is None:
        return None
    capped = request.max_tokens  # an unknown tenant is refused by the core (403)
    if tenant in contract.tenants:
        capped = facts(tenant, request.prompt_tokens, request.max_tokens).capped_tokens
    if tenant == request.tenant and request.t == now and request.max_tokens == capped:
        return request
    return request.rebound(tenant=tenant, t=now, max_tokens=capped)


async def spend(pool: CreditPool, request: Request, weight: float, clock: Clock) -> Request:
    """The pool's verdict, for the window the arrival is stamped in: an answer that comes back
    in the next window is asked again there (the credit is counted where the trace counts it).
    Returns the request stamped when the verdict came, carrying it (`Request.pool`)."""
    now, reason = request.t, "floor-lowered"
    for _ in range(POOL_TRIES):
        k, verdict = await pool.spend(request.rid, request.tenant, weight, now)
        now = clock.now()
        if pool.window(now) == k:
            reason = verdict
            break
    return request.rebound(tenant=request.tenant, t=now, max_tokens=request.max_tokens, pool=reason)
