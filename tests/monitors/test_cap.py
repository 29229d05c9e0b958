"""CAP: at most C in flight at every instant, and at most C_e on each engine routes or relocations name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.columnar import ColumnarTrace
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Evict, Relocate, Route
from rvguard.io import write_events
from rvguard.monitors import DEFAULT_PROPERTIES, Monitor
from rvguard.monitors.offline import check_offline

from .brute_force import capacity
from .strategies import small_contract

SPEC = Path(__file__).parent.parent.parent / "specs" / "marquee.yaml"
BARE = small_contract(runbook=False)  # C = 2, no fleet block
FLEET = small_contract()  # C = 2; fleet block: e0 holds 1, e1 holds 2


def _run(rid: str, t: float, tenant: str, basis: Basis = Basis.SURPLUS) -> list[Event]:
    return [Arrive(t, rid, tenant), Admit(t, rid, basis), Dispatch(t, rid)]


def test_ten_dispatched_at_once_under_c_4_fail_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Six floor and four surplus requests at once: AF (6 ≤ B) and RB (4 ≤ C − R) hold; CAP does not."""
    events = [ev for i in range(6) for ev in _run(f"a{i}", 0.0, "assured", Basis.FLOOR)]
    events += [ev for i in range(4) for ev in _run(f"o{i}", 0.0, "opportunistic")]
    trace = tmp_path / "ten.jsonl"
    write_events(trace, events)
    assert main(["check", str(trace), "--contract", str(SPEC), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert "CAP" in out["properties"]
    found = [(v["property"], v["rid"]) for v in out["violations"]]
    assert found == [("CAP", r) for r in ("a4", "a5", "o0", "o1", "o2", "o3")]
    first = out["violations"][0]
    assert first["detail"] == "dispatch made 5 requests in flight > C = 4"
    assert first["context"] == {
        "clause": "C",
        "limit": 4,
        "in_flight": 5,
        "holders": ["a0", "a1", "a2", "a3"],
    }
    assert [e["kind"] for e in first["witness"]] == ["arrive", "admit", "dispatch"]


def test_an_end_or_an_eviction_frees_the_slot() -> None:
    events = _run("a", 0.0, "o") + _run("b", 0.0, "o")
    events += [Complete(0.1, "a"), *_run("c", 0.1, "o"), Evict(0.2, "b", 5)]
    events += [*_run("d", 0.2, "o"), Relocate(0.3, "b", "e1"), Dispatch(0.3, "b")]
    m = Monitor(BARE, ("WF", "CAP"))
    m.feed_all(events)
    [v] = m.violations()  # b's second dispatch: c and d hold both slots
    assert (v.rid, v.t, v.context["in_flight"]) == ("b", 0.3, 3)
    assert capacity(events, BARE) == {("CAP", "b", 0.3)}


def test_a_relocated_request_is_judged_against_its_engines_limit_without_a_fleet_block() -> None:
    """x holds e0's one slot (its route carried C_e = 1); y, relocated to e0, may not take a second."""
    events = [Arrive(0.0, "x", "o"), Route(0.0, "x", "e0", 0.0, extra={"slots": 1}), Admit(0.0, "x")]
    events += [Dispatch(0.0, "x"), *_run("y", 0.0, "o"), Evict(0.1, "y", 3), Relocate(0.1, "y", "e0")]
    events += [Dispatch(0.1, "y")]
    m = Monitor(BARE, ("WF", "CAP"))
    m.feed_all(events)
    [v] = m.violations()
    assert (v.rid, v.t) == ("y", 0.1)
    assert v.detail == "dispatch made 2 requests in flight on engine 'e0' > C_e = 1"
    assert v.context == {"clause": "C_e", "limit": 1, "in_flight": 2, "engine": "e0", "holders": ["x"]}
    assert capacity(events, BARE) == {("CAP", "y", 0.1)}
    # the same relocation to an engine no route bounded: its limit is C = 2, which holds
    elsewhere = [*events[:-2], Relocate(0.1, "y", "e1"), Dispatch(0.1, "y")]
    assert Monitor(BARE, ("WF", "CAP")).feed_all(elsewhere) == []


def test_the_fleet_block_bounds_each_engine_and_a_late_route_takes_the_slot() -> None:
    events = [Arrive(0.0, "x", "o"), Route(0.0, "x", "e0", 0.0), Admit(0.0, "x"), Dispatch(0.0, "x")]
    events += [*_run("y", 0.0, "o"), Route(0.0, "y", "e0", 0.0)]  # late: y takes e0's slot now
    m = Monitor(FLEET, ("WF", "CAP"))
    found = m.feed_all(events)
    assert [(v.rid, v.context["clause"], v.context["limit"]) for v in found] == [("y", "C_e", 1)]
    assert found[0].witness[-1] == events[-1]
    assert capacity(events, FLEET) == {("CAP", "y", 0.0)}


def test_cap_is_on_by_default_and_judged_offline_as_a_running_count() -> None:
    assert "CAP" in DEFAULT_PROPERTIES
    events = [ev for i in range(3) for ev in _run(f"r{i}", 0.1 * i, "o")]
    online = Monitor(BARE)
    online.feed_all(events)
    offline = check_offline(ColumnarTrace.from_events(events), BARE)
    assert offline.vectorised
    assert [v.to_dict() for v in offline.violations] == [v.to_dict() for v in online.violations()]
    assert [(v.property, v.rid) for v in online.violations()] == [("CAP", "r2"), ("RB", "r2")]
