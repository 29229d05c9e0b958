"""RB: surplus work in flight never exceeds C − R, judged online and offline with witnesses.

Online and offline agreement on random traces is in test_differential (RB is in its
property set, and the brute-force checker states RB too); here: the table, a worked
example with its witness and context, counting that stays exact after a violation,
and RB being on by default and selectable by name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.cli import main
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, EventKind, Fail
from rvguard.io import write_events
from rvguard.monitors import DEFAULT_PROPERTIES, Monitor
from rvguard.monitors.offline import check_offline
from rvguard.monitors.rb import RB, SHOWN, Loc

from .brute_force import reserved_buffer
from .strategies import small_contract, wellformed_traces

C2R1 = small_contract(reserve=1)  # C = 2, R = 1: one surplus slot


def _run(contract: Contract, *steps: tuple[str, float, str, Basis | None]) -> list[Event]:
    out: list[Event] = []
    for kind, t, rid, basis in steps:
        if kind == "arrive":
            out.append(Arrive(t, rid, "o" if basis is not Basis.FLOOR else "a"))
        elif kind == "admit":
            out += [Admit(t, rid, basis or Basis.SURPLUS)]
        elif kind == "dispatch":
            out.append(Dispatch(t, rid))
        elif kind == "complete":
            out.append(Complete(t, rid))
        else:
            out.append(Fail(t, rid, "err"))
    return out


def _surplus(rid: str, t: float) -> list[tuple[str, float, str, Basis | None]]:
    return [("arrive", t, rid, Basis.SURPLUS), ("admit", t, rid, Basis.SURPLUS), ("dispatch", t, rid, None)]


_DESIGN2 = {"arrive", "admit", "reject", "dispatch", "complete", "drop", "fail"}


def _both(contract: Contract, events: list[Event]) -> list[tuple[str, str, float, str, dict[str, object]]]:
    mon = Monitor(contract, ["RB"])
    mon.feed_all(events)
    off = check_offline(ColumnarTrace.from_events(events), contract, ["RB"])
    assert off.vectorised == all(e.kind.value in _DESIGN2 for e in events)  # else replayed
    on = [(v.property, v.rid, v.t, v.detail, dict(v.context)) for v in mon.violations()]
    assert on == [(v.property, v.rid, v.t, v.detail, dict(v.context)) for v in off.violations]
    assert [v.witness for v in mon.violations()] == [v.witness for v in off.violations]
    return on


def test_a_second_surplus_dispatch_over_c_minus_r_is_reported_with_its_holders() -> None:
    events = _run(C2R1, *_surplus("s1", 0.0), *_surplus("s2", 0.1))
    [(prop, rid, t, detail, ctx)] = _both(C2R1, events)
    assert (prop, rid, t) == ("RB", "s2", 0.1)
    assert ctx == {"limit": 1, "surplus_in_flight": 2, "holders": ["s1"]}
    assert "2 surplus requests in flight > C − R = 1" in detail
    v = Monitor(C2R1, ["RB"])
    v.feed_all(events)
    assert [e.kind for e in v.violations()[0].witness] == [
        EventKind.ARRIVE,
        EventKind.ADMIT,
        EventKind.DISPATCH,
    ]


def test_floor_work_may_take_the_reserved_slots() -> None:
    floor = [
        ("arrive", 0.0, "f", Basis.FLOOR),
        ("admit", 0.0, "f", Basis.FLOOR),
        ("dispatch", 0.0, "f", None),
    ]
    assert _both(C2R1, _run(C2R1, *_surplus("s1", 0.0), *floor)) == []


def test_the_count_stays_exact_after_a_violation() -> None:
    """The violating request still ends (OVER is not final): once it and one other end, a new
    surplus dispatch fits; while both hold slots, another is a second violation."""
    steps = [*_surplus("s1", 0.0), *_surplus("s2", 0.1), ("complete", 0.2, "s2", None)]
    steps += [*_surplus("s3", 0.3), ("complete", 0.4, "s1", None), ("fail", 0.4, "s3", None)]
    steps += _surplus("s4", 0.5)
    found = _both(C2R1, _run(C2R1, *steps))
    assert [(rid, ctx["surplus_in_flight"]) for _, rid, _, _, ctx in found] == [("s2", 2), ("s3", 2)]


def test_holders_are_named_up_to_shown_in_dispatch_order() -> None:
    c = small_contract(reserve=2)  # C − R = 0: every surplus dispatch violates
    steps = [s for i in range(SHOWN + 3) for s in _surplus(f"s{i:02d}", 0.0)]
    found = _both(c, _run(c, *steps))
    assert len(found) == SHOWN + 3
    assert found[-1][4]["holders"] == [f"s{i:02d}" for i in range(SHOWN)]
    assert found[-1][4]["surplus_in_flight"] == SHOWN + 3


def test_every_located_pair_is_in_the_table_or_stays() -> None:
    """RB is lenient: a pair with no entry keeps its location; OVER still reacts to the ends
    (and to an eviction, which gives the slot back: DESIGN §10)."""
    ends = {EventKind.COMPLETE, EventKind.FAIL, EventKind.DROP, EventKind.EVICT}
    assert {k for (loc, k) in RB.transitions if loc is Loc.OVER} == ends
    assert {k for (loc, k) in RB.transitions if loc is Loc.RUNNING} == ends
    assert not RB.strict and not RB.bad_is_final and RB.bad == frozenset({Loc.OVER})


@settings(max_examples=300, deadline=None)
@given(st.booleans().flatmap(lambda runbook: wellformed_traces(runbook=runbook)))
def test_online_is_the_brute_force_statement_on_random_traces(events: list[Event]) -> None:
    for c in (C2R1, small_contract(), small_contract(reserve=2)):
        got = {(p, rid, t) for p, rid, t, _, _ in _both(c, events)}
        assert got == reserved_buffer(events, c.slots - c.reserve)


def test_rb_is_on_by_default_and_the_cli_selects_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "RB" in DEFAULT_PROPERTIES
    spec = tmp_path / "c.json"
    spec.write_text(json.dumps(C2R1.model_dump(mode="json")))
    trace = tmp_path / "t.jsonl"
    write_events(trace, _run(C2R1, *_surplus("s1", 0.0), *_surplus("s2", 0.1)))
    assert main(["check", str(trace), "--contract", str(spec), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [v["property"] for v in report["violations"]] == ["RB"]
    assert "by construction" in report["properties"]["RB"]
    assert main(["check", str(trace), "--contract", str(spec), "--properties", "AF,WF"]) == 0
