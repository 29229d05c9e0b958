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
arithmetic per row calls the contract's own functions (`Bound.at`,
`Contract.token_weight`, which accept arrays); only the cap and the default
deadline are restated for arrays, next to their scalar form here, and
tests/test_facts.py holds the two forms to equality on random shapes.

This module is pure: no I/O, no clock. numpy is imported by `fact_columns`
only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .contract import Contract, CreditMode
from .errors import UnknownTenantError

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
        weight: the floor credit the request spends (1 with count credits).
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

    def deadline(self, t: float, explicit: float | None = None) -> float:
        """The absolute deadline of a request arriving at ``t``: ``explicit``, else t + D."""
        return t + self.relative_deadline if explicit is None else explicit


def unknown_tenant(contract: Contract, tenant: str) -> UnknownTenantError:
    """The error for a tenant the contract lacks (its field is ``tenant``)."""
    return UnknownTenantError(
        f"tenant {tenant!r} is not in the contract ({', '.join(contract.tenants)})", field="tenant"
    )


def request_facts(
    contract: Contract, tenant: str, prompt_tokens: int | None, max_tokens: int | None
) -> RequestFacts:
    """The facts of one request shape (the definition; `FactsCache` caches it).

    Raises:
        UnknownTenantError: ``tenant`` is not in the contract.
    """
    spec = contract.tenants.get(tenant)
    if spec is None:
        raise unknown_tenant(contract, tenant)
    return RequestFacts(
        tenant=tenant,
        relative_deadline=spec.deadline,
        capped_tokens=contract.capped_tokens(max_tokens),
        lower=contract.lower_bound(max_tokens),
        upper=contract.upper_bound(max_tokens),
        weight=contract.weight(prompt_tokens, max_tokens),
        floored=spec.floored,
        tier=spec.tier,
    )


class FactsCache:
    """`request_facts` by shape, cached: contract lookups cost microseconds, a dict hit does not.

    Cost: O(1) per call; memory O(min(shapes seen, `CACHE_SIZE`)).
    """

    __slots__ = ("_cache", "_size", "contract")

    def __init__(self, contract: Contract, *, size: int = CACHE_SIZE) -> None:
        self.contract = contract
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
            facts = request_facts(self.contract, tenant, prompt_tokens, max_tokens)
            if len(self._cache) < self._size:
                self._cache[key] = facts
        return facts


@dataclass(frozen=True)
class FactColumns:
    """`RequestFacts` as columns, one row per request (``upper`` is nan where there is none)."""

    relative_deadline: npt.NDArray[np.float64]
    deadline: npt.NDArray[np.float64]
    capped_tokens: npt.NDArray[np.int64]
    lower: npt.NDArray[np.float64]
    upper: npt.NDArray[np.float64]
    weight: npt.NDArray[np.float64]
    floored: npt.NDArray[np.bool_]
    tier: npt.NDArray[np.int64]


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
    if contract.credit is CreditMode.TOKENS:
        weight = contract.token_weight(np.maximum(prompt_tokens, 0), capped).astype(np.float64)
    else:
        weight = np.ones(capped.shape)
    return FactColumns(
        relative_deadline=rel,
        deadline=deadline,
        capped_tokens=capped,
        lower=svc.lower.at(capped),
        upper=upper,
        weight=weight,
        floored=np.array([f.floored for f in per_tenant], dtype=bool)[tenant],
        tier=np.array([f.tier for f in per_tenant], dtype=np.int64)[tenant],
    )
