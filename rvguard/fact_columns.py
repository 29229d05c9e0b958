"""Request facts as columns, one row per request: `request_facts` over numpy arrays (offline checker).

The definition is `rvguard.facts` (see its docstring): the per-tenant facts come from
`request_facts` itself and the arithmetic per row calls the same functions; tests/test_facts.py
holds the two forms to equality on random shapes. Pure: no I/O; numpy is imported by
`fact_columns` when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .contract import Contract
from .facts import request_facts

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["FactColumns", "fact_columns"]


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
