"""AF's upper side on a single trace: floor credit admitted per tenant and window ≤ B.

A one-replica trace that admits 10 requests on the floor in a window with B = 6 fails `rvguard
check` at the 7th admit, with the clause in the witness; merged with a second replica's trace it
fails fleet-wide at the same admits (the fleet judge counts the same way).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.check import check_trace, check_traces
from rvguard.cli import main
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract, contract_from_mapping
from rvguard.events import Admit, Arrive, Basis, Dispatch, Event
from rvguard.io import write_events
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline

SPEC = Path(__file__).parent.parent.parent / "specs" / "marquee.yaml"


def _floor_admits(n: int, tenant: str = "assured", t: float = 0.0, prefix: str = "a") -> list[Event]:
    out: list[Event] = []
    for i in range(n):
        rid = f"{prefix}{i}"
        out += [Arrive(t + 0.01 * i, rid, tenant), Admit(t + 0.01 * i, rid, Basis.FLOOR)]
    return out


def test_ten_floor_admits_with_b_6_fail_check_at_the_seventh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "replica.jsonl"
    write_events(trace, _floor_admits(10))
    assert main(["check", str(trace), "--contract", str(SPEC), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    found = [(v["property"], v["rid"], v["t"]) for v in out["violations"]]
    assert found == [("AF", f"a{i}", 0.01 * i) for i in range(6, 10)]
    first = out["violations"][0]
    assert "admitted on the floor beyond B" in first["detail"] and "7 > B = 6" in first["detail"]
    assert [e["kind"] for e in first["witness"]] == ["arrive", "admit"]  # the bad prefix ends at the admit
    assert (first["context"]["floor_admitted"], first["context"]["floor"]) == (7.0, 6.0)


def test_a_replicas_share_is_judged_alone_and_merged_alike(tmp_path: Path, marquee: Contract) -> None:
    """Alone a replica is held to the whole B; merged, the fleet is: the same admits reported."""
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    write_events(one, _floor_admits(10))
    write_events(two, _floor_admits(0))  # a replica that admitted nothing
    alone = check_trace(str(one), marquee)
    merged = check_traces([str(one), str(two)], marquee)
    assert [(v.property, v.rid, v.t) for v in alone.violations] == [
        (v.property, v.rid, v.t) for v in merged.violations
    ]
    assert len(alone.violations) == 4
    # two replicas of 4 each stay within B alone, and together exceed it at the 7th admit fleet-wide
    write_events(one, _floor_admits(4, t=0.0, prefix="x"))
    write_events(two, _floor_admits(4, t=0.001, prefix="y"))
    assert check_trace(str(one), marquee).violations == []
    fleet = check_traces([str(one), str(two)], marquee)
    assert [(v.property, v.rid) for v in fleet.violations] == [("AF", "x3"), ("AF", "y3")]


def test_within_b_and_other_windows_hold(marquee: Contract) -> None:
    events = _floor_admits(6) + _floor_admits(6, t=1.0, prefix="b")  # B in each of two windows
    events += [Arrive(1.5, "o", "opportunistic"), Admit(1.5, "o", Basis.SURPLUS), Dispatch(1.5, "o")]
    m = Monitor(marquee)
    m.feed_all(events)
    assert m.violations() == []


TOKENS = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 4,
        "credit": "tokens",
        "output_cap": 10,
        "token_weights": {"prompt": 0.1, "output": 0.1},
        "service": {"s_max": 1.0, "lower": 0.1},
        "tenants": {"t": {"floor": 3, "deadline": 2.0, "tier": 0}},
    }
)


def test_token_credits_weigh_each_floor_admit_exactly() -> None:
    """B = 3 credits, each request 1 prompt + 10 output tokens × 0.1 = 1.1 (exactly: 0.1 + 1.0): the
    third floor admit spends 3.3 > 3. Decided on the decimals, as credits are (1.1 × 3 in floats is
    3.3000000000000003, which would say the same here; 0.1 × 30 would not)."""
    events: list[Event] = []
    for i in range(3):
        events += [
            Arrive(0.1 * i, f"r{i}", "t", prompt_tokens=1, max_tokens=10),
            Admit(0.1 * i, f"r{i}", Basis.FLOOR),
        ]
    m = Monitor(TOKENS)
    m.feed_all(events)
    [v] = m.violations()
    assert (v.property, v.rid) == ("AF", "r2") and "3.3 > B = 3" in v.detail
    offline = check_offline(ColumnarTrace.from_events(events), TOKENS)
    assert [x.to_dict() for x in offline.violations] == [v.to_dict()]


def test_an_unfloored_tenants_floor_admit_is_beyond_b_0(marquee: Contract) -> None:
    m = Monitor(marquee)
    m.feed_all([Arrive(0.0, "o", "opportunistic"), Admit(0.0, "o", Basis.FLOOR)])
    [v] = m.violations()
    assert v.property == "AF" and "1 > B = 0" in v.detail
