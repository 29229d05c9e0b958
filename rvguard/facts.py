"""Request facts: what the contract says about one request, defined once for every layer.

Theory of operation
-------------------
A request's contract facts — its relative and absolute deadline, its output
tokens after the cap, the service bounds L and U at that length, the credit
it spends, whether its tenant holds a floor, its tenant's tier — depend only
on the contract and the request's *shape* ``(tenant, prompt_tokens,
max_tokens)``. `request_facts` is their one definition; `FactsCache` is the
one cache (by shape, bounded) that the decision core, the online monitor,
the simulator's baselines and the Guard read them through, so a request's
facts are computed once and every layer agrees on them to the last bit.

`rvguard.fact_columns.fact_columns` is the same definition over numpy
columns, for the offline checker: the per-tenant facts come from
`request_facts` itself, and the arithmetic per row calls the same functions
(`Bound.at`, `rvguard.exact.CreditUnits.weight`, which accept arrays); only
the cap and the default deadline are restated for arrays (their scalar forms
are `Contract.capped_tokens` and `RequestFacts.deadline` here), and
tests/test_facts.py holds the two forms to equality on random shapes. It is
a module of its own so that the optional compiled build (`rvguard._compiled`)
compiles this one: mypyc evaluates a dataclass's annotations at import, and
those of the columns name numpy's types, imported only for the type checker.
A request's credit is exact, in whole units (`rvguard.exact`):
``weight_units``; ``weight`` is the same credit as the nearest float, for
reports and estimates.

This module is pure: no I/O, no clock, no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

from .contract import Contract
from .errors import UnknownTenantError
from .exact import CreditUnits

__all__ = ["FactsCache", "RequestFacts", "request_facts"]

#: shapes a `FactsCache` remembers; beyond it facts are computed and not kept (memory stays bounded)
CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """The contract's facts for one request shape.

    Attributes:
        tenant: the (authenticated) tenant.
        relative_deadline: D, seconds after arrival.
        capped_tokens: output tokens after the contract's cap.
        lower: L(R), the service lower bound at ``capped_tokens`` (DR).
        upper: U(R), or None when the contract has no upper bound.
        weight: the floor credit the request spends (1 with count credits), as a float.
        weight_units: the same credit in the contract's exact units (`Contract.credit_units`).
        floored: the tenant holds a floor (an assured request).
        tier: the tenant's dispatch rank (0 first).
    """

    tenant: str
    relative_deadline: float
    capped_tokens: int
    lower: float
    upper: float | None
    weight: float
    floored: bool
    tier: int
    weight_units: int = 1

    def deadline(self, t: float, explicit: float | None = None) -> float:
        """The absolute deadline of a request arriving at ``t``: ``explicit``, else t + D."""
        return t + self.relative_deadline if explicit is None else explicit


def unknown_tenant(contract: Contract, tenant: str) -> UnknownTenantError:
    """The error for a tenant the contract lacks (its field is ``tenant``)."""
    return UnknownTenantError(
        f"tenant {tenant!r} is not in the contract ({', '.join(contract.tenants)})", field="tenant"
    )


def request_facts(
    contract: Contract,
    tenant: str,
    prompt_tokens: int | None,
    max_tokens: int | None,
    units: CreditUnits | None = None,
) -> RequestFacts:
    """The facts of one request shape (the definition; `FactsCache` caches it).

    ``units`` is the contract's `Contract.credit_units` (computed when not given).

    Raises:
        UnknownTenantError: ``tenant`` is not in the contract.
    """
    spec = contract.tenants.get(tenant)
    if spec is None:
        raise unknown_tenant(contract, tenant)
    u = contract.credit_units() if units is None else units
    w = contract.weight_units(prompt_tokens, max_tokens, u)
    return RequestFacts(
        tenant=tenant,
        relative_deadline=spec.deadline,
        capped_tokens=contract.capped_tokens(max_tokens),
        lower=contract.lower_bound(max_tokens),
        upper=contract.upper_bound(max_tokens),
        weight=u.credits(w),
        floored=spec.floored,
        tier=spec.tier,
        weight_units=w,
    )


class FactsCache:
    """`request_facts` by shape, cached: contract lookups cost microseconds, a dict hit does not.

    Cost: O(1) per call; memory O(min(shapes seen, `CACHE_SIZE`)).
    """

    __slots__ = ("_cache", "_size", "contract", "units")

    def __init__(self, contract: Contract, *, size: int = CACHE_SIZE) -> None:
        self.contract = contract
        self.units = contract.credit_units()
        self._size = size
        self._cache: dict[tuple[str, int | None, int | None], RequestFacts] = {}

    def __call__(self, tenant: str, prompt_tokens: int | None, max_tokens: int | None) -> RequestFacts:
        """The facts of a request of ``tenant`` with these sizes.

        Raises:
            UnknownTenantError: ``tenant`` is not in the contract.
        """
        key = (tenant, max_tokens, prompt_tokens)
        facts = self._cache.get(key)
        if facts is None:
            facts = request_facts(self.contract, tenant, prompt_tokens, max_tokens, self.units)
            if len(self._cache) < self._size:
                self._cache[key] = facts
        return facts
