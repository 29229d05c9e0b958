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

`fact_columns` is the same definition over numpy columns, for the offline
checker: the per-tenant facts come from `request_facts` itself, and the
arithmetic per row calls the same functions (`Bound.at`,
`rvguard.exact.CreditUnits.weight`, which accept arrays); only the cap and
the default deadline are restated for arrays, next to their scalar form
here, and tests/test_facts.py holds the two forms to equality on random
shapes. A request's credit is exact, in whole units (`rvguard.exact`):
``weight_units``; ``weight`` is the same credit as the nearest float, for
reports and estimates.

This module is pure: no I/O, no clock. numpy is imported by `fact_columns`
only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .contract import Contract
from .errors import UnknownTenantError
from .exact import CreditUnits

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["FactColumns", "FactsCache", "RequestFacts", "fact_columns", "request_facts"]

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


@dataclass(frozen=True)
class FactColumns:
    """`RequestFacts` as columns, one row per request (``upper`` is nan where there is none).

    ``weight_units`` is int64 while every window's sum fits a float exactly
    (below 2^53), else Python ints (dtype object): exact either way.
    """

    relative_deadline: npt.NDArray[np.float64]
    deadline: npt.NDArray[np.float64]
    capped_tokens: npt.NDArray[np.int64]
    lower: npt.NDArray[np.float64]
    upper: npt.NDArray[np.float64]
    weight: npt.NDArray[np.float64]
    floored: npt.NDArray[np.bool_]
    tier: npt.NDArray[np.int64]
    weight_units: npt.NDArray[Any]


def fact_columns(
    contract: Contract,
    tenant_names: tuple[str, ...],
    tenant: npt.NDArray[np.int64],
    t: npt.NDArray[np.float64],
    explicit_deadline: npt.NDArray[np.float64],
    prompt_tokens: npt.NDArray[np.int64],
    max_tokens: npt.NDArray[np.int64],
) -> FactColumns:
    """`request_facts` for each row: ``tenant`` indexes ``tenant_names``; -1 / nan mean "not given".

    Raises:
        UnknownTenantError: a tenant name is not in the contract.
    """
    import numpy as np

    per_tenant = [request_facts(contract, name, None, None) for name in tenant_names]
    rel = np.array([f.relative_deadline for f in per_tenant], dtype=np.float64)[tenant]
    # the cap (Contract.capped_tokens) and the default deadline (RequestFacts.deadline), for arrays
    cap = contract.output_cap
    capped = np.where(max_tokens < 0, cap, np.minimum(max_tokens, cap)).astype(np.int64)
    deadline = np.where(np.isnan(explicit_deadline), t + rel, explicit_deadline)
    svc = contract.service
    upper = np.full(capped.shape, np.nan) if svc.upper is None else svc.upper.at(capped)
    units = contract.credit_units()
    prompt = np.maximum(prompt_tokens, 0)
    if units.weight(int(prompt.max(initial=0)), cap) * max(capped.size, 1) >= 2**53:
        prompt, capped_u = prompt.astype(object), capped.astype(object)  # Python ints: no overflow
    else:
        capped_u = capped
    weight_units = units.weight(prompt, capped_u)
    weight = (weight_units / units.scale).astype(np.float64)
    return FactColumns(
        relative_deadline=rel,
        deadline=deadline,
        capped_tokens=capped,
        lower=svc.lower.at(capped),
        upper=upper,
        weight=weight,
        weight_units=weight_units,
        floored=np.array([f.floored for f in per_tenant], dtype=bool)[tenant],
        tier=np.array([f.tier for f in per_tenant], dtype=np.int64)[tenant],
    )
