"""k-induction of the admission floor (AF) over the credit logic's transition relation.

Theory of operation. One floored tenant's credit logic is a transition
system; a step is one arrival. The state after step i is

* ``time_i``: the last arrival time (windows have length 1, origin 0: any
  contract is this one after shifting by t0 and scaling by W);
* ``window_i``: the index of that arrival's window;
* ``offered_i``: credit offered by the window's arrivals so far (the
  contract's `rvguard.contract.Entitlement` counter);
* ``used_i``: credit spent on floor admissions in the window.

An arrival at ``t_i ≥ time_{i-1}`` with weight ``weight_i`` (1 with count
credits, any value ≥ ``w_min`` with token credits) and an arbitrary learner
proposal ``learner_i`` starts a new window when its index grows (both
counters reset), is *entitled* when ``offered + w ≤ B`` and is admitted on
the floor when it is entitled and ``used + w ≤ B`` — the rule of
`rvguard.enforce.core.DecisionCore` (tests/verify/test_credit_differential.py
replays random arrivals through both); the core spends reserved credit
whatever the learner says, and the learner decides only the surplus. The floor B is
symbolic, so a proof holds for every floor.

Invariant P: ``used ≤ B ∧ used ≤ offered``; step property Q: an entitled
arrival is admitted on the floor. `prove_af` runs k-induction: the base case
unrolls k steps from the initial state looking for a state violating P or
a step violating Q; the inductive case assumes P ∧ Q on k consecutive steps
from an arbitrary state and looks for a violation at step k + 1. Mutants
(``reset_on_new_window=False``, ``check_entitlement_only=...``) let the
tests see the check fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._z3 import as_number, load_z3

__all__ = ["GUARD_LOGIC", "CreditLogic", "InductionResult", "prove_af"]


@dataclass(frozen=True, slots=True)
class CreditLogic:
    """Which credit logic to check (the default is the guard's).

    Attributes:
        tokens: token credits (weights ≥ w_min) instead of one credit a request.
        w_min: least token weight (> 0) when ``tokens``.
        reset_on_new_window: reset the used-credit counter when the window
            index grows (the offered counter, being the contract's, always resets).
        charge_learner_admits: (a mutant) also charge floor credit for
            surplus admissions the learner makes.
    """

    tokens: bool = False
    w_min: float = 1.0
    reset_on_new_window: bool = True
    charge_learner_admits: bool = False


@dataclass(frozen=True, slots=True)
class InductionResult:
    """The outcome of `prove_af`.

    Attributes:
        proved: P ∧ Q hold on every run.
        k: the induction depth that closed the proof (or the base-case depth
            of the counterexample).
        trace: for a counterexample, the values per step (times, weights,
            counters, entitled, admitted, learner), then ``{"floor": B}``.
    """

    proved: bool
    k: int
    trace: list[dict[str, float | int | bool]] | None = None


GUARD_LOGIC = CreditLogic()


def _state(z3: Any, i: int) -> dict[str, Any]:
    return {
        "time": z3.Real(f"time_{i}"),
        "window": z3.Int(f"window_{i}"),
        "offered": z3.Real(f"offered_{i}"),
        "used": z3.Real(f"used_{i}"),
    }


def _step(z3: Any, logic: CreditLogic, b: Any, pre: dict[str, Any], i: int) -> tuple[dict[str, Any], Any]:
    """The transition from ``pre`` by arrival i; returns the next state and its constraints."""
    post = _state(z3, i)
    t, k, w = z3.Real(f"t_{i}"), z3.Int(f"k_{i}"), z3.Real(f"weight_{i}")
    learner = z3.Bool(f"learner_{i}")
    new = k > pre["window"]
    offered0 = z3.If(new, 0, pre["offered"])  # the contract's entitlement always resets
    used0 = z3.If(new, 0, pre["used"]) if logic.reset_on_new_window else pre["used"]
    entitled = z3.Bool(f"entitled_{i}")
    floor_admit = z3.And(entitled, used0 + w <= b)
    charged = z3.Or(floor_admit, learner) if logic.charge_learner_admits else floor_admit
    admitted = z3.Bool(f"admitted_{i}")
    weight_ok = w >= logic.w_min if logic.tokens else w == 1
    trans = z3.And(
        t >= pre["time"],
        z3.ToReal(k) <= t,
        t < k + 1,
        weight_ok,
        entitled == (offered0 + w <= b),
        admitted == floor_admit,
        post["time"] == t,
        post["window"] == k,
        post["offered"] == offered0 + w,
        post["used"] == used0 + z3.If(charged, w, 0),
    )
    return post, trans


def _invariant(z3: Any, b: Any, s: dict[str, Any]) -> Any:
    return z3.And(s["used"] <= b, s["used"] <= s["offered"])


def _af(z3: Any, i: int) -> Any:
    return z3.Implies(z3.Bool(f"entitled_{i}"), z3.Bool(f"admitted_{i}"))


def _unroll(z3: Any, logic: CreditLogic, b: Any, first: dict[str, Any], k: int) -> tuple[list[Any], Any]:
    states, constraints = [first], []
    for i in range(1, k + 1):
        nxt, trans = _step(z3, logic, b, states[-1], i)
        states.append(nxt)
        constraints.append(trans)
    return states, z3.And(constraints)


def _trace(z3: Any, model: Any, k: int) -> list[dict[str, float | int | bool]]:
    rows: list[dict[str, float | int | bool]] = []
    for i in range(1, k + 1):
        row: dict[str, float | int | bool] = {}
        for name in ("t", "weight", "offered", "used"):
            row[name] = as_number(z3, model.eval(z3.Real(f"{name}_{i}"), model_completion=True))
        for name in ("entitled", "admitted", "learner"):
            row[name] = z3.is_true(model.eval(z3.Bool(f"{name}_{i}"), model_completion=True))
        rows.append(row)
    return rows


def _base_case(z3: Any, logic: CreditLogic, b: Any, k: int) -> Any:
    init = _state(z3, 0)
    s = z3.Solver()
    s.assert_and_track(
        z3.And(init["time"] == 0, init["window"] == -1, init["offered"] == 0, init["used"] == 0), "init"
    )
    s.assert_and_track(b >= 0, "floor")
    states, trans = _unroll(z3, logic, b, init, k)
    s.assert_and_track(trans, "transitions")
    bad = [z3.Not(z3.And(_invariant(z3, b, states[i]), _af(z3, i))) for i in range(1, k + 1)]
    s.add(z3.Or(bad))
    return s


def _inductive_case(z3: Any, logic: CreditLogic, b: Any, k: int) -> Any:
    s = z3.Solver()
    s.assert_and_track(b >= 0, "floor")
    states, trans = _unroll(z3, logic, b, _state(z3, 0), k + 1)
    s.assert_and_track(trans, "transitions")
    s.assert_and_track(_invariant(z3, b, states[0]), "invariant_0")
    for i in range(1, k + 1):
        s.assert_and_track(z3.And(_invariant(z3, b, states[i]), _af(z3, i)), f"hypothesis_{i}")
    s.add(z3.Not(z3.And(_invariant(z3, b, states[k + 1]), _af(z3, k + 1))))
    return s


def prove_af(logic: CreditLogic = GUARD_LOGIC, *, max_k: int = 4) -> InductionResult:
    """Prove AF for the credit logic by k-induction, k = 1 … ``max_k``.

    Returns:
        ``proved=True`` with the closing k; or a base-case counterexample
        trace; or ``proved=False, trace=None`` when no k ≤ ``max_k`` closes.
    """
    z3 = load_z3()
    b = z3.Real("floor_0") if logic.tokens else z3.ToReal(z3.Int("floor_0"))
    for k in range(1, max_k + 1):
        base = _base_case(z3, logic, b, k)
        if base.check() == z3.sat:
            model = base.model()
            trace = _trace(z3, model, k)
            trace.append({"floor": as_number(z3, model.eval(b, model_completion=True))})
            return InductionResult(False, k, trace)
        if _inductive_case(z3, logic, b, k).check() == z3.unsat:
            return InductionResult(True, k)
    return InductionResult(False, max_k, None)
