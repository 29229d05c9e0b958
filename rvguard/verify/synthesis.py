"""Safe-parameter synthesis with z3's optimiser (DESIGN §5).

One parameter moves, every other field keeps its contract value:

* `synthesize_floor`: the largest whole floor B of a tenant such that
  stability and every floored tenant's deadline clause hold;
* `synthesize_deadline`: the smallest deadline D of a floored tenant for
  which its deadline clause holds (D is exact: the bound itself);
* `synthesize_slots`: the smallest slot count C (≥ the reserve) for which
  stability and every deadline clause hold;
* `synthesize_reserve`: the smallest reserve R (0 ≤ R ≤ C) for which every
  floored tenant's deadline clause holds (`rvguard.verify.reserve`: the
  clause grows with R, so every larger R meets it too).

The service-envelope and DR clauses do not depend on B, D or C, so they
are not part of the optimisation; `rvguard.verify.preconditions` reports them.

Every optimum is taken over the same clauses that `verify` checks with the
same options: the closing deadline bound by default, the bound under the
refuted backlog assumption with ``VerifyOptions(backlog_assumption=True)``
(``verify --assume-backlog``). The closing bound counts the windows a
request's cohort can come from, which grows with the deadlines: the
deadlines that hold need not be all those above the smallest one (a gap
can follow a window edge), so `synthesize_deadline` returns the smallest.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..contract import Contract, CreditMode
from ..errors import SpecError
from ._z3 import as_number, load_z3, real
from .encoding import DEFAULT_OPTIONS, Encoding, VerifyOptions
from .obligations import encode_deadline, encode_stability, unbounded_ahead
from .reserve import reserve_bound

__all__ = [
    "PARAMETERS",
    "BoundAt",
    "SynthesisResult",
    "deadline_bound",
    "default_tenant",
    "synthesize",
    "synthesize_deadline",
    "synthesize_floor",
    "synthesize_reserve",
    "synthesize_slots",
]

PARAMETERS = ("floor", "deadline", "slots", "reserve")


@dataclass(frozen=True, slots=True)
class SynthesisResult:
    """The optimum of one parameter, the others fixed.

    Attributes:
        parameter: ``floor``, ``deadline``, ``slots`` or ``reserve``.
        tenant: the tenant whose floor or deadline moved (None for slots).
        field: the contract field path, e.g. ``tenants.assured.floor``.
        value: the optimum, or None when no value satisfies the clauses.
        current: the contract's own value of the field.
        message: one sentence stating the result.
    """

    parameter: str
    tenant: str | None
    field: str
    value: float | int | None
    current: float | int
    message: str

    def to_json(self) -> dict[str, Any]:
        """The ``synthesis`` object of ``rvguard verify --json``."""
        return {
            "parameter": self.parameter,
            "tenant": self.tenant,
            "field": self.field,
            "value": self.value,
            "current": self.current,
            "message": self.message,
        }


def default_tenant(contract: Contract) -> str:
    """The floored tenant of the highest rank (lowest tier), else the first tenant."""
    floored = sorted((t.tier, n) for n, t in contract.floored_tenants.items())
    return floored[0][1] if floored else next(iter(contract.tenants))


def _require_tenant(contract: Contract, tenant: str | None) -> str:
    name = default_tenant(contract) if tenant is None else tenant
    if name not in contract.tenants:
        known = ", ".join(sorted(contract.tenants))
        raise SpecError(f"tenants.{name}: no such tenant (known: {known})", field=f"tenants.{name}")
    return name


def _why(options: VerifyOptions) -> str:
    return " (proven only under the backlog assumption)" if options.backlog_assumption else ""


def _deadline_goal(enc: Encoding, tenant: str, options: VerifyOptions) -> Any:
    """The deadline clause as a constraint; false when unfloored work ranks ahead.

    The clause holds *for every* u_j of an unfloored tenant ranked ahead
    (`unbounded_ahead`); asserted into an optimiser u_j would be chosen, so
    the clause is stated as what it is for every value of B, D and C: false.
    """
    if unbounded_ahead(enc.contract, tenant):
        return enc.z3.BoolVal(False)
    return encode_deadline(enc, tenant)


def _goals(enc: Encoding, options: VerifyOptions) -> list[Any]:
    goals = [encode_stability(enc)]
    goals += [_deadline_goal(enc, n, options) for n in enc.contract.floored_tenants]
    return goals


def _symbol_value(z3: Any, fact: Any) -> tuple[Any, Any]:
    """(symbol, value) of a fact ``symbol == value`` (z3 may keep the two sides either way round)."""
    left, right = fact.arg(0), fact.arg(1)
    numeral = z3.is_int_value(left) or z3.is_rational_value(left)
    return (right, left) if numeral else (left, right)


def _optimum(enc: Encoding, goals: list[Any], objective: Any, *, maximize: bool) -> float | int | None:
    """The optimum of ``objective`` under the facts, definitions and ``goals``; the fixed fields are
    substituted by their values first, so a product of a fixed field and a variable (k·ŝ in the
    reserved clause) is linear for the optimiser (its nonlinear search can stop short of the optimum)."""
    z3 = enc.z3
    fixed = [_symbol_value(z3, fact) for fact in enc.facts.values()]
    constraints = [z3.simplify(z3.substitute(e, *fixed)) for e in (*enc.definitions.values(), *goals)]
    opt = z3.Optimize()
    opt.add(*enc.facts.values(), *constraints)
    handle = opt.maximize(objective) if maximize else opt.minimize(objective)
    verdict = opt.check()
    if verdict == z3.unsat:
        return None
    if verdict != z3.sat:
        raise RuntimeError(f"z3 could not optimise: {opt.reason_unknown()}")
    del handle
    return as_number(z3, opt.model().eval(objective, model_completion=True))


def synthesize_floor(
    contract: Contract, tenant: str | None = None, *, options: VerifyOptions = DEFAULT_OPTIONS
) -> SynthesisResult:
    """The largest whole floor B for ``tenant`` (≥ 1), the other fields fixed.

    Raises:
        SpecError: ``tenant`` is not in the contract.
    """
    z3 = load_z3()
    name = _require_tenant(contract, tenant)
    field = f"tenants.{name}.floor"
    current = contract.tenants[name].floor
    shaped = contract
    if not contract.tenants[name].floored:  # give it the structure of a floored tenant
        tenants = dict(contract.tenants)
        tenants[name] = tenants[name].model_copy(update={"floor": 1})
        shaped = contract.model_copy(update={"tenants": tenants})
    enc = Encoding(z3, shaped, options=options, free=[field])
    b = z3.Int("floor.whole_0")
    floor = enc.term(field)
    tie = floor == b if contract.credit is CreditMode.COUNT else floor == z3.ToReal(b)
    value = _optimum(enc, [*_goals(enc, options), tie, b >= 1], b, maximize=True)
    d, c = contract.tenants[name].deadline, contract.slots
    if value is None:
        msg = f"no floor ≥ 1 for {name} meets stability and the deadlines with D = {d} s and C = {c}"
    else:
        msg = f"largest floor for {name} with deadline {d} s and {c} slots: {value}{_why(options)}"
    return SynthesisResult("floor", name, field, value, current, msg)


#: fixed-point steps `synthesize_deadline` takes before it reports that no deadline holds
DEADLINE_STEPS = 512


def deadline_bound(
    contract: Contract, tenant: str, options: VerifyOptions = DEFAULT_OPTIONS
) -> Fraction | None:
    """The bound `verify` compares ``tenant``'s deadline with, at the contract's own deadlines (exact).

    None when the clause has no finite bound (unfloored work ranked ahead) or
    token weights let a request spend nothing.
    """
    bound = BoundAt(contract, tenant, options)
    return bound(Fraction(repr(float(contract.tenants[tenant].deadline))))


class BoundAt:
    """f(D): ``tenant``'s bound with its deadline at D, the other fields fixed (one incremental solver)."""

    def __init__(self, contract: Contract, tenant: str, options: VerifyOptions) -> None:
        self.z3 = z3 = load_z3()
        self.contract, self.tenant = contract, tenant
        self.unbounded = bool(unbounded_ahead(contract, tenant))
        enc = Encoding(z3, contract, options=options, free=[f"tenants.{tenant}.deadline"])
        encode_deadline(enc, tenant)
        self.deadline = enc.term(f"tenants.{tenant}.deadline")
        self.reserved = f"def:floor_block.{tenant}" in enc.definitions
        self.solver = z3.Solver()
        self.solver.add(*enc.facts.values(), *enc.definitions.values())

    def __call__(self, d: Fraction) -> Fraction | None:
        z3, s, tenant = self.z3, self.solver, self.tenant
        if self.unbounded:
            return None
        s.push()
        s.add(self.deadline == real(z3, d))
        try:
            if s.check() != z3.sat:
                return None
            m = s.model()
        finally:
            s.pop()

        def q(name: str) -> Fraction:
            return Fraction(m.eval(z3.Real(f"{name}.{tenant}_0"), model_completion=True).as_fraction())

        if not self.reserved:
            return q("bound")
        n = m.eval(z3.Int(f"requests.ahead.{tenant}_0"), model_completion=True).as_long()
        c = self.contract
        return reserve_bound(n, c.slots, c.reserve, q("wave"), q("block"), q("floor_block"))


def synthesize_deadline(
    contract: Contract, tenant: str | None = None, *, options: VerifyOptions = DEFAULT_OPTIONS
) -> SynthesisResult:
    """The smallest deadline D for a floored ``tenant`` whose clause holds, the other fields fixed.

    The clause is D ≥ f(D), f the bound `deadline_bound` computes; f does not
    decrease as D grows (more windows can hold the cohort). So the least D
    with D ≥ f(D) is the limit of D ← f(D) from below, reached in finitely
    many steps (f is a step function); when the steps go on past
    `DEADLINE_STEPS`, or past 10⁶ windows, the bound outgrows the deadline
    (the cohort's demand per window exceeds the slots') and no deadline is
    reported.

    Raises:
        SpecError: ``tenant`` is not in the contract or holds no floor.
    """
    name = _require_tenant(contract, tenant)
    field = f"tenants.{name}.deadline"
    if not contract.tenants[name].floored:
        raise SpecError(f"tenants.{name}.floor: a deadline bound needs a floored tenant", field=field)
    value: float | None = None
    d, cap = Fraction(1, 10**9), Fraction(repr(float(contract.window))) * 10**6
    bound = BoundAt(contract, name, options)
    for _ in range(DEADLINE_STEPS):
        if d > cap:
            break
        f = bound(d)
        if f is None:
            break
        if f <= d:
            value = float(d)
            break
        d = f
    b, c = contract.tenants[name].floor, contract.slots
    msg = f"smallest deadline for {name} with floor {b:g} and {c} slots: {value} s{_why(options)}"
    if value is None and unbounded_ahead(contract, name):
        ahead = ", ".join(unbounded_ahead(contract, name))
        msg = f"no deadline for {name}: unfloored work ({ahead}) ranks ahead of its floor, unbounded"
    elif value is None:
        msg = f"no deadline for {name}: the bound grows with the deadline faster than it (lower the floors)"
    return SynthesisResult("deadline", name, field, value, contract.tenants[name].deadline, msg)


def synthesize_slots(contract: Contract, *, options: VerifyOptions = DEFAULT_OPTIONS) -> SynthesisResult:
    """The smallest slot count C (≥ 1) for which stability and every deadline hold."""
    z3 = load_z3()
    enc = Encoding(z3, contract, options=options, free=["slots"])
    c = enc.term("slots")
    value = _optimum(enc, [*_goals(enc, options), c >= max(1, contract.reserve)], c, maximize=False)
    if value is None:
        msg = "no slot count meets every deadline: a deadline is below blocking + one wave of service"
    else:
        msg = f"smallest slot count for this contract: {value}{_why(options)}"
    return SynthesisResult("slots", None, "slots", value, contract.slots, msg)


def synthesize_reserve(
    contract: Contract, tenant: str | None = None, *, options: VerifyOptions = DEFAULT_OPTIONS
) -> SynthesisResult:
    """The smallest reserve R (0 ≤ R ≤ C) meeting the deadline clause of ``tenant`` (default: of
    every floored tenant), the other fields fixed; ``value`` None when even R = C does not.

    Raises:
        SpecError: ``tenant`` is not in the contract or holds no floor.
    """
    z3 = load_z3()
    names = list(contract.floored_tenants) if tenant is None else [_require_tenant(contract, tenant)]
    if tenant is not None and not contract.tenants[names[0]].floored:
        raise SpecError(
            f"tenants.{tenant}.floor: a deadline needs a floored tenant", field=f"tenants.{tenant}"
        )
    enc = Encoding(z3, contract, options=options, free=["reserve"])
    r, c = enc.term("reserve"), contract.slots
    goals = [_deadline_goal(enc, n, options) for n in names]
    value = _optimum(enc, [*goals, r >= 0, r <= c], r, maximize=False)
    whose = "every floored deadline" if tenant is None else f"the deadline of {names[0]}"
    if value is None:
        ahead = sorted({j for n in names for j in unbounded_ahead(contract, n)})
        why = (
            f"unfloored work ({', '.join(ahead)}) ranks ahead of a floor, unbounded"
            if ahead
            else f"even R = C = {c} (surplus never runs) leaves a bound above it: "
            "raise the deadline or the slots, or lower the floor"
        )
        msg = f"no reserve meets {whose}: {why}{_why(options)}"
    else:
        msg = (
            f"smallest reserve meeting {whose}: {value} of {c} slots "
            f"(surplus holds at most {c - int(value)}){_why(options)}"
        )
    return SynthesisResult("reserve", tenant, "reserve", value, contract.reserve, msg)


def synthesize(
    contract: Contract,
    parameter: str,
    tenant: str | None = None,
    *,
    options: VerifyOptions = DEFAULT_OPTIONS,
) -> SynthesisResult:
    """Dispatch to the synthesis of ``parameter`` (``floor``, ``deadline``, ``slots`` or ``reserve``).

    Raises:
        SpecError: unknown parameter or tenant.
    """
    if parameter == "floor":
        return synthesize_floor(contract, tenant, options=options)
    if parameter == "deadline":
        return synthesize_deadline(contract, tenant, options=options)
    if parameter == "slots":
        return synthesize_slots(contract, options=options)
    if parameter == "reserve":
        return synthesize_reserve(contract, tenant, options=options)
    raise SpecError(f"--synthesize: expected one of {', '.join(PARAMETERS)}, got {parameter!r}")
