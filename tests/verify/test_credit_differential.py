"""The k-induction model of the credit logic is the decision core's: replay random arrivals through both.

`rvguard.verify.af_induction` proves AF on a z3 transition relation; this test
keeps that relation honest. Each random arrival sequence (times, weights,
learner bits) goes through `DecisionCore` and, step by step, through the
model's `_step` with the concrete pre-state: the model's ``entitled`` and
``admitted`` must equal the core's entitlement and its floor admission.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.contract import Contract, Entitlement, contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.events import Admit, Basis, Proposal
from rvguard.verify._z3 import as_number, load_z3
from rvguard.verify.af_induction import CreditLogic, _step


def _contract(floor: int, tokens: bool) -> Contract:
    return contract_from_mapping(
        {
            "epoch": 0.0,
            "window": 1.0,  # the model's windows: length 1, origin 0
            "slots": 2,
            "output_cap": 50,
            "credit": "tokens" if tokens else "count",
            "token_weights": {"prompt": 0.0, "output": 1.0},
            "service": {"s_max": 0.5, "s_max_opp": 0.5, "lower": 0.01},
            "tenants": {
                "a": {"floor": floor, "deadline": 5.0, "tier": 0},
                "o": {"floor": 0, "deadline": 5.0},
            },
        }
    )


arrival = st.tuples(
    st.integers(0, 40),  # time step in 1/8 s: several arrivals a window, several windows
    st.integers(1, 6),  # weight (output tokens) with token credits
    st.booleans(),  # the learner's admit bit
)


def _model_step(z3: Any, logic: CreditLogic, floor: int, pre: dict[str, float], i: int, t: float, w: float,
                learner: bool) -> tuple[dict[str, float], bool, bool]:  # fmt: skip
    b = z3.RealVal(floor)
    pre_vars = {k: z3.Real(f"pre_{k}_{i}") if k != "window" else z3.Int(f"pre_{k}_{i}") for k in pre}
    post, trans = _step(z3, logic, b, pre_vars, i)
    s = z3.Solver()
    s.add(trans, *(pre_vars[k] == (int(v) if k == "window" else z3.RealVal(v)) for k, v in pre.items()))
    s.add(z3.Real(f"t_{i}") == z3.RealVal(t), z3.Real(f"weight_{i}") == z3.RealVal(w))
    s.add(z3.Bool(f"learner_{i}") == learner)
    assert s.check() == z3.sat
    m = s.model()
    nxt = {k: as_number(z3, m.eval(v, model_completion=True)) for k, v in post.items()}
    entitled = z3.is_true(m.eval(z3.Bool(f"entitled_{i}"), model_completion=True))
    admitted = z3.is_true(m.eval(z3.Bool(f"admitted_{i}"), model_completion=True))
    return nxt, entitled, admitted


@settings(max_examples=60, deadline=None)
@given(
    floor=st.integers(1, 8),
    tokens=st.booleans(),
    arrivals=st.lists(arrival, min_size=1, max_size=12),
)
def test_model_and_core_admit_the_same_requests_on_the_floor(
    floor: int, tokens: bool, arrivals: list[tuple[int, int, bool]]
) -> None:
    z3 = load_z3()
    c = _contract(floor, tokens)
    logic = CreditLogic(tokens=tokens, w_min=1.0)
    core, ent = DecisionCore(c), Entitlement(c)
    pre: dict[str, float] = {"time": 0.0, "window": -1, "offered": 0.0, "used": 0.0}
    steps = sorted(arrivals, key=lambda a: a[0])
    for i, (tick, weight, learner) in enumerate(steps, 1):
        t, w = tick / 8, float(weight if tokens else 1)
        request = Request(f"r{i}", "a", t, max_tokens=weight)
        events = core.arrive(request, Proposal(admit=learner), t)
        core_floor = any(isinstance(e, Admit) and e.basis is Basis.FLOOR for e in events)
        core_entitled = ent.arrive("a", t, c.weight_units(None, weight))[1]
        pre, entitled, admitted = _model_step(z3, logic, floor, pre, i, t, w, learner)
        assert (entitled, admitted) == (core_entitled, core_floor), (i, t, w, pre)
