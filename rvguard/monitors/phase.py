"""The phase sweep: the trace re-judged against contract origins shifted by φ ∈ [0, W).

Entitlement depends on the window origin. A guard whose origin differs from
the contract's enforces a different contract, so a trace that attains its
floor at φ = 0 can fall short at another phase. For each of N phases
φ_j = j·W/N the sweep recomputes entitlement (vectorised, the same prefix
rule as `Entitlement`) and reports the floor attainment and the rejected
requests that the shifted origin makes entitled. A trace with DESIGN §10
rows is swept on its admission rows (`columns.admission_rows`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..columnar import ColumnarTrace
from ..contract import Contract
from ..errors import SpecError
from ..lifecycle import COMPLETE, REJECT
from .columns import admission_rows, entitlement_columns, protocol_is_clean, request_table, row_index

__all__ = ["PhaseRow", "PhaseSweep", "phase_sweep"]

_EXAMPLES = 10


@dataclass(frozen=True, slots=True)
class PhaseRow:
    """Attainment at one phase; ``newly_entitled_rejections`` counts rejects entitled here but not at φ=0."""

    phase: float
    entitled: int
    attained: int
    attainment: float | None
    newly_entitled_rejections: int
    examples: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PhaseSweep:
    """All phases, and the worst attainment among them."""

    rows: tuple[PhaseRow, ...]
    worst_phase: float | None
    worst_attainment: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)


def phase_sweep(trace: ColumnarTrace, contract: Contract, steps: int) -> PhaseSweep:
    """Re-judge floor attainment at ``steps`` window origins ``t0 + j·W/steps``.

    Args:
        trace: a WF-clean trace (bad lines already left out).
        contract: the contract; only its origin is shifted.
        steps: number of phases N ≥ 1.

    Raises:
        SpecError: ``steps`` < 1.
    """
    if steps < 1:
        raise SpecError(f"--phase-sweep needs at least 1 step, got {steps}", field="phase_sweep", value=steps)
    trace = admission_rows(trace)  # routes, demotions, evictions change no admission or outcome
    index = row_index(trace)
    if len(trace) == 0 or not protocol_is_clean(trace, index):
        return PhaseSweep((), None, None)
    req = request_table(trace, contract, index)
    on_time = (req.end_kind == COMPLETE) & (req.t_end <= req.deadline)
    served = ~np.isnan(req.t_admit) & on_time
    rejected = req.end_kind == REJECT
    base = entitlement_columns(req, trace, contract)[1]
    rows = []
    for j in range(steps):
        phi = j * contract.window / steps
        ent = entitlement_columns(req, trace, contract, origin=contract.epoch + phi)[1]
        entitled = int(ent.sum())
        attained = int((ent & served).sum())
        newly = np.flatnonzero(ent & ~base & rejected)
        rows.append(
            PhaseRow(
                phase=phi,
                entitled=entitled,
                attained=attained,
                attainment=None if entitled == 0 else attained / entitled,
                newly_entitled_rejections=int(newly.size),
                examples=tuple(trace.rid_names[int(r)] for r in newly[:_EXAMPLES]),
            )
        )
    scored = [r for r in rows if r.attainment is not None]
    if not scored:
        return PhaseSweep(tuple(rows), None, None)
    worst = min(scored, key=lambda r: (r.attainment, r.phase))
    return PhaseSweep(tuple(rows), worst.phase, worst.attainment)
