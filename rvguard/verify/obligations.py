"""The contract's preconditions (DESIGN §5), one z3 encoding per clause.

Each ``encode_<clause>(enc)`` returns the clause's *goal* as a z3 BoolRef
over the symbols of an `Encoding`. `decide` proves a goal valid under the
contract's value facts (``push(); add(Not(goal)); check(); pop()``, on a
solver made for that one call) or returns the model of its negation, and
then the unsat core of facts ∧ goal, which names the conflicting fields.

The clauses (N_i = entitled requests per window, waves = ⌈N/C⌉):

* stability (A4): Σ_{floored i} N_i · s_i ≤ C · W.
* deadline (per floored tenant i): D_i ≥ b_i + ⌈N_i / C⌉ · ŝ_i, where ŝ_i
  is the largest ceiling of the floored tenants at tier ≤ tier_i, b_i
  (blocking) the largest ceiling of anything that can hold a slot at lower
  priority (s_max_opp, the ceilings of lower tiers, and with ``excess:
  demote`` every floored ceiling: demoted excess runs below the floors), and
  N_i (`encode_requests_ahead`) the floor requests that can be at or ahead of
  a request of i. By default the closing bound, a proof by induction over
  arrivals (proofs/README.md §2): with x = D_i − ŝ_i,
  N_i = Σ_{tier_j = tier_i} N_j·(⌈D_j/W⌉ + 1) + Σ_{tier_j < tier_i} N_j·(⌈(D_j + x)/W⌉ + 1).
  With ``VerifyOptions(backlog_assumption=True)`` (refuted; opt-in) one
  window of each at or ahead of the tier plus the higher tiers' arrivals
  while it waits. b_i also covers the deployed same-instant order
  (completions before arrivals): a lower-priority job that takes a slot
  freed at R's arrival instant starts then and holds it at most b_i.
  Unfloored work ranked ahead: an unfloored tenant j with tier_j < tier_i
  has its surplus dispatched before i's floor (the core ranks by tier first,
  floor before surplus only within a tier), and nothing bounds how much of
  it the learner admits. Each such j adds u_j ≥ 0 requests, with no upper
  bound, to N_{≤i} (and its ceiling to ŝ_i), so the clause holds for no
  deadline; the counterexample shows the u_j that breaks it. At the same
  tier the floor ranks first, so such work only blocks (it is in b_i).
  With a reserve R > 0 (or R being synthesised) the clause counts it:
  starts(D − ŝ_i) ≥ N_{≤i}, derived in `rvguard.verify.reserve` (surplus
  blocks at most C − R slots; R = 0 gives back the clause above).
* service_envelope: with an upper bound U(ℓ) = a + b·ℓ, every ceiling
  covers U at every output length up to ``output_cap`` (the guard caps every
  request there, so U(cap) is the envelope's top).
* dr_soundness: L(ℓ) ≤ every ceiling and L(ℓ) ≤ U(ℓ) for ℓ ∈ [0, cap]: a
  lower bound above a possible service would make doom-sound drops shed
  feasible work. L ≤ the true service stays a declared assumption that the
  monitors check online; this clause only flags an envelope that is
  inconsistent on its face.
* credit_bound (token credits only): w_min = prompt·p_min + output·min(o_min,
  cap) > 0, so N_i = ⌊B_i / w_min⌋ bounds requests per window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract import Contract, CreditMode, ExcessPolicy
from ._z3 import as_number
from .encoding import Encoding, ceiling_field, opp_field
from .reserve import encode_reserved_deadline, reserved

__all__ = [
    "Decision",
    "ObligationResult",
    "blocking_fields",
    "cohort",
    "decide",
    "encode_credit_bound",
    "encode_deadline",
    "encode_dr_soundness",
    "encode_service_envelope",
    "encode_stability",
    "unbounded_ahead",
    "unbounded_symbols",
]

OUTPUT_TOKENS = "output_tokens"


@dataclass(frozen=True, slots=True)
class ObligationResult:
    """The verdict on one obligation.

    Attributes:
        name: the clause, e.g. ``stability`` or ``deadline[assured]``.
        holds: True when z3 proved the clause from the contract's values.
        counterexample: the values that violate it (fields and derived terms).
        fields: contract field paths in the conflict (the unsat core).
        message: one sentence a person can act on.
        assumptions: what the verdict is proven from (`rvguard.verify.assumptions`).
    """

    name: str
    holds: bool
    counterexample: dict[str, float | int] | None
    fields: list[str]
    message: str
    assumptions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form (DESIGN §8)."""
        return {
            "name": self.name,
            "holds": self.holds,
            "counterexample": self.counterexample,
            "fields": list(self.fields),
            "message": self.message,
            "assumptions": list(self.assumptions),
        }


@dataclass(frozen=True, slots=True)
class Decision:
    """What `decide` found: validity, or a counterexample and the core.

    ``values`` holds the fields and derived terms (bounds, waves) under the
    contract's facts; it is the counterexample when the goal fails.
    """

    holds: bool
    values: dict[str, float | int]
    fields: list[str]

    @property
    def counterexample(self) -> dict[str, float | int] | None:
        """The violating values, or None when the goal holds."""
        return None if self.holds else self.values


# -- dispatch structure (read in Python) ------------------------------------
def cohort(contract: Contract, tenant: str) -> list[str]:
    """Floored tenants dispatched at or ahead of ``tenant`` (tier ≤ its tier)."""
    tier = contract.tenants[tenant].tier
    return [n for n, t in contract.tenants.items() if t.floored and t.tier <= tier]


def unbounded_ahead(contract: Contract, tenant: str) -> list[str]:
    """Unfloored tenants ranked ahead of ``tenant``'s floor (a smaller tier): their work has no bound."""
    tier = contract.tenants[tenant].tier
    return [n for n, t in contract.tenants.items() if not t.floored and t.tier < tier]


def unbounded_symbols(contract: Contract, tenant: str) -> tuple[str, ...]:
    """The names of the u_j terms of ``tenant``'s deadline clause (to pin in `decide`)."""
    return tuple(f"requests.unbounded.{j}" for j in unbounded_ahead(contract, tenant))


def blocking_fields(contract: Contract, tenant: str) -> list[str]:
    """Ceiling fields of work that can hold a slot at lower priority than ``tenant``."""
    tier = contract.tenants[tenant].tier
    fields = [opp_field(contract)]
    for name, t in contract.tenants.items():
        lower = t.tier > tier
        demoted = t.floored and contract.excess is ExcessPolicy.DEMOTE
        if lower or demoted:
            fields.append(ceiling_field(contract, name))
    return sorted(set(fields))


def _ceiling_fields(contract: Contract) -> list[str]:
    fields = {ceiling_field(contract, n) for n in contract.tenants} | {opp_field(contract)}
    return sorted(fields)


# -- encodings ---------------------------------------------------------------
def encode_stability(enc: Encoding) -> Any:
    """A4: Σ_{floored i} N_i · s_i ≤ C · W."""
    z3 = enc.z3
    floored = list(enc.contract.floored_tenants)
    demand = z3.Sum([enc.requests(n) * enc.ceiling(n) for n in floored]) if floored else z3.RealVal(0)
    enc.define("demand", z3.Real("demand_0") == demand)
    return z3.Real("demand_0") <= enc.term("slots") * enc.term("window")


def _windows(enc: Encoding, name: str, length: Any) -> Any:
    """Windows a half-open interval of ``length`` meets: ⌈length/W⌉ + 1 when length > 0, else 0."""
    return enc.windows(name, length)


def encode_requests_ahead(enc: Encoding, tenant: str, latest_start: Any) -> Any:
    """N_i: the floor requests that can rank at or ahead of a request q of ``tenant`` (q included).

    q arrives at t and must start by t + x (x = ``latest_start``). Ahead of it
    are floor requests of tenants at its tier in the system at t, and floor
    requests of higher tiers (smaller tier numbers) in the system at t or
    arriving in (t, t + x]. Each tenant j has at most N_j floor requests per
    window. Closing bound (the default): j's requests in the system at t
    arrived after t − D_j (every earlier request meets its deadline: the
    induction of proofs/README.md §2), so they fall in (t − D_j, t] (same
    tier) or (t − D_j, t + x] (higher tier), which meet ⌈·/W⌉ + 1 windows.
    Under the backlog assumption (opt-in, refuted): at most N_j of j in the
    system at t, plus the higher tiers' arrivals in (t, t + x].
    """
    z3, c = enc.z3, enc.contract
    mine = c.tenants[tenant].tier
    after = z3.If(latest_start > 0, latest_start, z3.RealVal(0))
    terms = []
    for j in cohort(c, tenant):
        higher = c.tenants[j].tier < mine
        n_j = enc.requests(j)
        if enc.options.backlog_assumption:
            extra = _windows(enc, f"{tenant}.{j}", after) if higher else 0
            terms.append(n_j * (1 + extra) if higher else n_j)
        else:
            span = enc.term(f"tenants.{j}.deadline") + (after if higher else 0)
            terms.append(n_j * _windows(enc, f"{tenant}.{j}", span))
    return z3.Sum(terms)


def encode_deadline(enc: Encoding, tenant: str) -> Any:
    """The deadline clause of ``tenant`` (see the module docstring): D_i ≥ b_i + ⌈N_i/C⌉·ŝ_i.

    N_i is `encode_requests_ahead` at x = D_i − ŝ_i (the latest start that
    still ends by D_i), by the closing bound or, with
    ``VerifyOptions(backlog_assumption=True)``, under the refuted backlog
    assumption. Unfloored tenants ranked ahead add unbounded terms u_j
    (`unbounded_ahead`): pin them (`unbounded_symbols`) when extracting the core.
    """
    z3 = enc.z3
    ahead = cohort(enc.contract, tenant)
    unbounded = unbounded_ahead(enc.contract, tenant)
    surplus = []
    for name in unbounded_symbols(enc.contract, tenant):
        u = z3.Int(f"{name}_0")  # no upper bound: the learner admits as much as it likes
        enc.define(name, u >= 0)
        surplus.append(u)
    wave = enc.max_of([enc.ceiling(j) for j in ahead + unbounded])
    latest = enc.term(f"tenants.{tenant}.deadline") - wave
    enc.define(f"latest_start.{tenant}", z3.Real(f"latest_start.{tenant}_0") == latest)
    n = z3.Int(f"requests.ahead.{tenant}_0")
    floors = encode_requests_ahead(enc, tenant, latest)
    enc.define(f"requests.ahead.{tenant}", n == floors + z3.Sum(surplus) if surplus else n == floors)
    block = enc.max_of([enc.term(f) for f in blocking_fields(enc.contract, tenant)])
    if reserved(enc):
        return encode_reserved_deadline(enc, tenant, n, block, wave)
    waves = enc.waves(tenant, n)
    bound = z3.Real(f"bound.{tenant}_0")
    enc.define(f"bound.{tenant}", bound == block + waves * wave)
    return enc.term(f"tenants.{tenant}.deadline") >= bound


def _tokens(enc: Encoding) -> Any:
    z3 = enc.z3
    ell = z3.Int(f"{OUTPUT_TOKENS}_0")
    return ell, z3.And(ell >= 0, ell <= enc.term("output_cap"))


def _bound_at(enc: Encoding, which: str, ell: Any) -> Any:
    return enc.term(f"service.{which}.base") + enc.term(f"service.{which}.per_token") * ell


def encode_service_envelope(enc: Encoding) -> Any:
    """∀ℓ ∈ [0, cap]: U(ℓ) ≤ every ceiling (true when no U is declared)."""
    z3 = enc.z3
    if enc.contract.service.upper is None:
        return z3.BoolVal(True)
    ell, in_range = _tokens(enc)
    upper = _bound_at(enc, "upper", ell)
    return z3.Implies(in_range, z3.And([upper <= enc.term(f) for f in _ceiling_fields(enc.contract)]))


def encode_dr_soundness(enc: Encoding) -> Any:
    """∀ℓ ∈ [0, cap]: L(ℓ) ≤ every ceiling, and L(ℓ) ≤ U(ℓ) when U is declared."""
    z3 = enc.z3
    ell, in_range = _tokens(enc)
    lower = _bound_at(enc, "lower", ell)
    below = [lower <= enc.term(f) for f in _ceiling_fields(enc.contract)]
    if enc.contract.service.upper is not None:
        below.append(lower <= _bound_at(enc, "upper", ell))
    return z3.Implies(in_range, z3.And(below))


def encode_credit_bound(enc: Encoding) -> Any:
    """w_min > 0: token credits bound the number of requests per window."""
    if enc.contract.credit is CreditMode.COUNT:
        return enc.z3.BoolVal(True)
    return enc.min_weight() > 0


# -- deciding ----------------------------------------------------------------
def _model_values(enc: Encoding, model: Any) -> dict[str, float | int]:
    z3 = enc.z3
    values: dict[str, float | int] = {}
    for decl in model.decls():
        name = decl.name()
        if name.endswith("_0"):
            values[name[:-2]] = as_number(z3, model.eval(decl(), model_completion=True))
    return dict(sorted(values.items()))


def _tracked_solver(enc: Encoding) -> Any:
    s = enc.z3.Solver()
    s.set("core.minimize", False)  # minimizing can run for minutes (seen: 15) on the multi-tier bound
    for name, expr in {**enc.facts, **enc.definitions}.items():
        s.assert_and_track(expr, name)
    return s


def decide(enc: Encoding, goal: Any, *, pinned: tuple[str, ...] = (OUTPUT_TOKENS,)) -> Decision:
    """Prove ``goal`` from the encoding's facts, or explain why it fails.

    Args:
        enc: the encoding whose facts and definitions are assumed.
        goal: the clause to prove.
        pinned: auxiliary symbols (read universally by the goal) to fix at
            the counterexample's values when extracting the core.

    Returns:
        A `Decision`; ``fields`` is the unsat core of facts ∧ goal.

    Raises:
        RuntimeError: z3 answered ``unknown``.
    """
    z3 = enc.z3
    s = _tracked_solver(enc)
    if s.check() != z3.sat:  # the values contradict a definition (e.g. w_min = 0)
        return Decision(False, {}, _core(s))
    values = _model_values(enc, s.model())
    s.push()
    s.add(z3.Not(goal))
    verdict = s.check()
    if verdict == z3.unsat:
        return Decision(True, values, [])
    if verdict != z3.sat:
        raise RuntimeError(f"z3 could not decide the goal: {s.reason_unknown()}")
    values = _model_values(enc, s.model())
    pins = [z3.Int(f"{p}_0") == values[p] for p in pinned if p in values]
    s.pop()
    s.push()
    s.add(*pins, goal)
    fields = _core(s) if s.check() == z3.unsat else []
    s.pop()
    return Decision(False, values, fields)


def _core(s: Any) -> list[str]:
    return sorted(str(c) for c in s.unsat_core() if not str(c).startswith("def:"))
