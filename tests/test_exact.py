"""Exact credits and decimal window edges, on every path, against an oracle on the decimal strings.

Paths: `contract.Entitlement`, the decision core, the online `Monitor`, the
offline checker (vectorised), its `window_indices`, ``rvguard check``, the
phase sweep, and the Z3 schedule model of `rvguard verify`. The oracle
(tests/exact_oracle.py) imports none of the code it checks.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.cli import main
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract, Entitlement, contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.events import Admit, Arrive, Basis, Event, Proposal, Reject, event_to_dict
from rvguard.exact import CreditUnits, credit_units, window_index
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline, window_indices
from rvguard.monitors.phase import phase_sweep

from .exact_oracle import OracleArrival, OracleContract, entitled

NO = Proposal(admit=False)


def _contract(o: OracleContract) -> Contract:
    tenants = {
        n: {"floor": float(f), "deadline": 1.0, "tier": i} for i, (n, f) in enumerate(o.floors.items())
    }
    return contract_from_mapping(
        {
            "epoch": float(o.epoch),
            "window": float(o.window),
            "slots": 1,
            "output_cap": o.output_cap,
            "credit": o.credit,
            "token_weights": {"prompt": float(o.prompt), "output": float(o.output)},
            "service": {"s_max": 1.0},
            "tenants": tenants,
        }
    )


def _rejected(arrivals: list[OracleArrival]) -> list[Event]:
    """Every request rejected: each entitled one is an AF violation, at its window."""
    out: list[Event] = []
    for a in arrivals:
        t = float(a.t)
        out += [Arrive(t, a.rid, a.tenant, None, a.prompt_tokens, a.max_tokens), Reject(t, a.rid, "x")]
    return out


def _paths(o: OracleContract, arrivals: list[OracleArrival]) -> dict[str, dict[str, Any]]:
    """Each path's entitled rids (and, where it reports them, their windows)."""
    c = _contract(o)
    ent = Entitlement(c)
    by_ent = {}
    for a in arrivals:
        k, ok, _, _ = ent.arrive(a.tenant, float(a.t), c.weight_units(a.prompt_tokens, a.max_tokens))
        by_ent[a.rid] = (k, ok)
    core = DecisionCore(c)
    floor_admits = set()
    for a in arrivals:
        req = Request(a.rid, a.tenant, float(a.t), None, a.prompt_tokens, a.max_tokens)
        evs = core.arrive(req, NO, float(a.t))
        floor_admits |= {e.rid for e in evs if isinstance(e, Admit) and e.basis is Basis.FLOOR}
    trace = _rejected(arrivals)
    online = Monitor(c, ["AF"]).feed_all(trace)
    offline = check_offline(ColumnarTrace.from_events(trace), c, ["AF"])
    assert offline.vectorised
    return {
        "entitlement": {r: k for r, (k, ok) in by_ent.items() if ok},
        "windows": {r: k for r, (k, _) in by_ent.items()},
        "core": dict.fromkeys(floor_admits),
        "online": {v.rid: v.context["window"] for v in online},
        "offline": {v.rid: v.context["window"] for v in offline.violations},
    }


def test_issue_10_floor_0_3_and_weights_0_1_entitle_a_request_of_weight_0_3(tmp_path: Path) -> None:
    """1 prompt + 2 output tokens at 0.1 credit: 0.3 = B, entitled (float sums: 0.30000000000000004)."""
    o = OracleContract({"gold": "0.3"}, "0", "1", credit="tokens", prompt="0.1", output="0.1")
    arrivals = [OracleArrival("r", "gold", "0.5", prompt_tokens=1, max_tokens=2)]
    assert entitled(o, arrivals) == {"r": (0, True)}
    paths = _paths(o, arrivals)
    assert paths["entitlement"] == paths["online"] == paths["offline"] == {"r": 0}
    assert set(paths["core"]) == {"r"}
    c = _contract(o)
    assert c.weight(1, 2) == 0.3 and c.weight_units(1, 2) == c.credit_units().floors["gold"]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in _rejected(arrivals)))
    spec = tmp_path / "c.json"
    spec.write_text(json.dumps(c.model_dump(mode="json")))
    assert main(["check", str(trace), "--contract", str(spec), "--json"]) == 1  # the AF violation is seen
    sweep = phase_sweep(ColumnarTrace.from_events(_rejected(arrivals)), c, 1)
    assert sweep.rows[0].entitled == 1


def test_an_arrival_written_at_a_decimal_window_edge_is_in_the_window_it_opens() -> None:
    """W = 0.1: 0.3 and 0.7 open windows 3 and 7, though 3 · 0.1 = 0.30000000000000004 in floats."""
    o = OracleContract({"gold": "1"}, "0", "0.1")
    times = ["0.2", "0.3", "0.3", "0.6", "0.7", "0.7"]
    arrivals = [OracleArrival(f"r{i}", "gold", t) for i, t in enumerate(times)]
    expect = entitled(o, arrivals)
    assert [k for k, _ in expect.values()] == [2, 3, 3, 6, 7, 7]
    paths = _paths(o, arrivals)
    ok = {r: k for r, (k, e) in expect.items() if e}
    assert ok == {"r0": 2, "r1": 3, "r3": 6, "r4": 7}
    assert paths["entitlement"] == paths["online"] == paths["offline"] == ok
    assert set(paths["core"]) == set(ok)
    t = np.array([float(a.t) for a in arrivals])
    assert window_indices(t, 0.0, 0.1).tolist() == [2, 3, 3, 6, 7, 7]


decimals = st.sampled_from(["0", "0.05", "0.1", "0.2", "0.25", "0.3", "1", "1.5", "2.7"])


Scenario = tuple[OracleContract, list[OracleArrival]]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    credit = draw(st.sampled_from(["count", "tokens"]))
    whole = st.sampled_from(["0", "1", "2", "3"])
    floor = whole if credit == "count" else st.sampled_from(["0", "0.3", "0.6", "0.9", "1.2", "2.5"])
    epoch = draw(st.sampled_from(["0", "0.1", "0.05", "3.3"]))
    window = draw(st.sampled_from(["0.1", "0.3", "1", "0.7"]))
    o = OracleContract(
        {"a": draw(floor), "b": draw(floor), "o": "0"},
        epoch,
        window,
        credit=credit,
        prompt=draw(decimals),
        output=draw(st.sampled_from(["0.1", "0.05", "0.3", "1"])),
        output_cap=draw(st.integers(1, 5)),
    )
    # times on a decimal grid fine enough to hit the window edges epoch + k·W, and between them
    ticks = sorted(draw(st.lists(st.integers(0, 40), min_size=1, max_size=25)))
    arrivals = [
        OracleArrival(
            f"r{i}",
            draw(st.sampled_from(["a", "a", "b", "o"])),
            str(Decimal(epoch) + tick * Decimal("0.05")),
            draw(st.one_of(st.none(), st.integers(0, 4))),
            draw(st.one_of(st.none(), st.integers(0, 6))),
        )
        for i, tick in enumerate(ticks)
    ]
    return o, arrivals


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_every_path_entitles_as_the_decimal_oracle(
    scenario: tuple[OracleContract, list[OracleArrival]],
) -> None:
    o, arrivals = scenario
    expect = entitled(o, arrivals)
    ok = {r: k for r, (k, e) in expect.items() if e}
    paths = _paths(o, arrivals)
    assert paths["windows"] == {r: k for r, (k, _) in expect.items()}
    assert paths["entitlement"] == ok
    assert paths["online"] == ok
    assert paths["offline"] == ok
    assert set(paths["core"]) == set(ok)
    t = np.array([float(a.t) for a in arrivals])
    assert window_indices(t, float(o.epoch), float(o.window)).tolist() == [k for k, _ in expect.values()]


def test_credit_units_are_exact_for_the_decimals_written() -> None:
    u = credit_units({"a": 0.3, "b": 12.5, "o": 0.0}, 0.1, 0.05, count=False)
    assert u == CreditUnits(20, u.floors, 2, 1, False) and dict(u.floors) == {"a": 6, "b": 250, "o": 0}
    assert u.weight(1, 4) == 6 and u.credits(6) == 0.3
    assert credit_units({"a": 6.0}, 1.0, 1.0, count=True).weight(10, 10) == 1


def test_large_scales_stay_exact_offline() -> None:
    """Weights of 0.1 + 1e-17 credit: units beyond int64 sums, so the offline path sums Python ints.

    Three such requests spend 0.30000000000000003 ≤ B = 0.30000000000000004 (float sums: 0.1 + 1e-17
    is 0.1, and three of them 0.30000000000000004 > ... only by luck; the units decide exactly).
    """
    o = OracleContract(
        {"a": "0.30000000000000004"}, "0", "1", credit="tokens", prompt="0.001", output="0.00000000000000001"
    )
    arrivals = [OracleArrival(f"r{i}", "a", "0.5", 100, 1) for i in range(4)]
    ok = {r: k for r, (k, e) in entitled(o, arrivals).items() if e}
    assert set(ok) == {"r0", "r1", "r2"}
    c = _contract(o)
    assert c.weight_units(100, 1) * 4 >= 2**53
    paths = _paths(o, arrivals)
    assert paths["entitlement"] == paths["online"] == paths["offline"] == ok
    assert set(paths["core"]) == set(ok)


def test_the_window_index_is_float_fast_away_from_edges() -> None:
    assert window_index(0.55, 0.0, 0.1) == 5
    assert window_index(0.3, 0.0, 0.1) == 3  # 0.3 / 0.1 = 2.9999999999999996 in floats
    assert window_index(-0.05, 0.0, 0.1) == -1


def test_the_verify_schedule_model_puts_an_edge_arrival_in_the_window_it_opens() -> None:
    """The Z3 model counts windows [kW, (k+1)W) in integer ticks: an arrival at W is in window 1."""
    from rvguard.verify._z3 import load_z3
    from rvguard.verify.schedule import ModelParams, _variables, encode_entitlement

    z3 = load_z3()
    p = ModelParams(slots=1, floor=1, window=10, s_max=1, s_opp=1, deadline=5, windows=2, opp_jobs=0)
    for first, second, possible in ((9, 10, True), (10, 10, False), (10, 19, False), (0, 9, False)):
        v = _variables(z3, p)
        s = z3.Solver()
        s.add(encode_entitlement(z3, p, v), v.a[0] == first, v.a[1] == second)
        assert (s.check() == z3.sat) is possible, (first, second)


def test_every_path_raises_no_float_sum_where_the_oracle_says_equal() -> None:
    """0.1 · 3 requests of one output token = 0.3 = B: the third is entitled on every path."""
    o = OracleContract({"a": "0.3"}, "0", "1", credit="tokens", prompt="0", output="0.1")
    arrivals = [OracleArrival(f"r{i}", "a", "0.5", 0, 1) for i in range(4)]
    ok = {r: k for r, (k, e) in entitled(o, arrivals).items() if e}
    assert set(ok) == {"r0", "r1", "r2"}
    paths = _paths(o, arrivals)
    assert paths["entitlement"] == paths["online"] == paths["offline"] == ok
    assert set(paths["core"]) == set(ok)
