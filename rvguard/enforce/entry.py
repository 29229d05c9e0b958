"""A request's way into the Guard: its tenant bound, its arrival stamped, its output capped.

Theory of operation
-------------------
The core decides on a `Request` whose tenant is the true one (bound from
authenticated identity, never from a learner), whose ``t`` is its arrival on
the Guard's clock and whose ``max_tokens`` is the contract's cap of what the
client asked (the request's facts, `DecisionCore.facts`). Each of these is
settled once, on one of two ways in:

* `Guard.submit_bound` takes a `BoundRequest`: a request *created complete*
  (`BoundRequest.create`) by a caller that bound the tenant itself (the
  gateway, on the headers), stamped on the Guard's clock in the step it is
  submitted and capped from the facts it carries. The Guard calls no binder,
  reads no facts and makes no new `Request`: the core decides on this object
  and is handed these facts.
* `Guard.submit` takes a library caller's `Request` and identity; `bind` binds
  the identity with the Guard's binder (its ``bind`` called once; no binder:
  the request's tenant is taken as bound), stamps the arrival ``now``, reads
  the facts once to cap the output, and makes a new `Request`
  (`Request.rebound`) only where the caller's differs.

With a shared credit pool (`CreditPool`) a floored tenant's arrival spends
there first (`spend`): the pool answers after an await, so the arrival is
stamped again then, in the window the pool counted it (the one rebuild left on
either way in, and only with a pool).

Pure but for `spend`, which awaits the pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from ..clock import Clock
from ..contract import Contract
from ..errors import EnforcementError
from ..facts import FactsCache, RequestFacts
from .identity import Identity, IdentityBinder
from .request import Request

__all__ = ["POOL_TRIES", "BoundRequest", "CreditPool", "bind", "spend"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})

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


@dataclass(frozen=True, slots=True)
class BoundRequest:
    """A request created complete, with the facts it was capped from: `Guard.submit_bound` takes
    it as it is (module doc). Make it with `create`, in the step it is submitted.

    Raises:
        EnforcementError: ``request`` does not match ``facts`` (tenant, capped output): 500.
    """

    request: Request
    facts: RequestFacts

    def __post_init__(self) -> None:
        r, f = self.request, self.facts
        if r.tenant != f.tenant or r.max_tokens != f.capped_tokens:
            raise EnforcementError(
                f"request {r.rid!r} ({r.tenant!r}, max_tokens {r.max_tokens}) is not the request of its "
                f"facts ({f.tenant!r}, capped {f.capped_tokens})",
                status_hint=500,
            )

    @classmethod
    def create(
        cls,
        rid: str,
        facts: RequestFacts,
        t: float,
        *,
        deadline: float | None = None,
        prompt_tokens: int | None = None,
        payload: Mapping[str, Any] = _EMPTY,
    ) -> BoundRequest:
        """The request of ``facts`` (read for ``facts.tenant``, ``prompt_tokens`` and the client's
        ``max_tokens``: `DecisionCore.facts`), arriving at ``t`` on the Guard's clock, its output
        capped (``facts.capped_tokens``), created once.

        Raises:
            EnforcementError: as the class.
        """
        r = Request(rid, facts.tenant, t, deadline, prompt_tokens, facts.capped_tokens, payload)
        return cls(r, facts)


def bind(
    request: Request,
    identity: Identity | None,
    binder: IdentityBinder | None,
    facts: FactsCache,
    contract: Contract,
    now: float,
) -> tuple[Request, RequestFacts | None] | None:
    """``request`` bound (``binder``'s tenant for ``identity``; none: its own), stamped ``now`` and
    capped from its facts, with those facts (``None`` for a tenant the contract lacks: the core
    refuses it, 403); the request itself when it already was all three; ``None``: the binder
    refused the identity."""
    tenant = request.tenant if binder is None else binder.bind(identity).tenant
    if tenant is None:
        return None
    known = None
    capped = request.max_tokens
    if tenant in contract.tenants:
        known = facts(tenant, request.prompt_tokens, request.max_tokens)
        capped = known.capped_tokens
    if tenant == request.tenant and request.t == now and request.max_tokens == capped:
        return request, known
    return request.rebound(tenant=tenant, t=now, max_tokens=capped), known


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
