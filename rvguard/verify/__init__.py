"""Symbolic verification of a contract's preconditions with Z3 (DESIGN §5).

Importing this package imports none of its modules (each name loads on first
use, `rvguard._lazy`) and never z3: every solver entry point loads
it inside the function (`rvguard.verify._z3.load_z3`), and without
z3-solver it raises `rvguard.errors.MissingExtraError` naming the ``smt``
extra.

* `verify_contract` / `verify_file`: the obligations (stability, deadline
  per floored tenant, service envelope, DR soundness, credit bound);
* `synthesize_floor`, `synthesize_deadline`, `synthesize_slots`,
  `synthesize_reserve`: optima (`rvguard.verify.reserve`: the deadline with a reserve);
* `rvguard.verify.schedule`: the bounded schedule model and the backlog
  lemma search; `rvguard.verify.tiers`: the same model with several floored
  tenants and tiers; `rvguard.verify.af_induction`: k-induction of the AF credit logic.
"""

from __future__ import annotations

import typing

from .._lazy import attach as _attach

if typing.TYPE_CHECKING:
    from .encoding import VerifyOptions as VerifyOptions
    from .obligations import ObligationResult as ObligationResult
    from .preconditions import all_hold as all_hold
    from .preconditions import verify_contract as verify_contract
    from .preconditions import verify_file as verify_file
    from .synthesis import SynthesisResult as SynthesisResult
    from .synthesis import synthesize as synthesize
    from .synthesis import synthesize_deadline as synthesize_deadline
    from .synthesis import synthesize_floor as synthesize_floor
    from .synthesis import synthesize_reserve as synthesize_reserve
    from .synthesis import synthesize_slots as synthesize_slots

__all__ = [
    "ObligationResult",
    "SynthesisResult",
    "VerifyOptions",
    "all_hold",
    "synthesize",
    "synthesize_deadline",
    "synthesize_floor",
    "synthesize_reserve",
    "synthesize_slots",
    "verify_contract",
    "verify_file",
]

__getattr__, __dir__ = _attach(
    __name__,
    {
        ".preconditions": ("all_hold", "verify_contract", "verify_file"),
        ".encoding": ("VerifyOptions",),
        ".obligations": ("ObligationResult",),
        ".synthesis": (
            "SynthesisResult",
            "synthesize",
            "synthesize_deadline",
            "synthesize_floor",
            "synthesize_reserve",
            "synthesize_slots",
        ),
    },
)
