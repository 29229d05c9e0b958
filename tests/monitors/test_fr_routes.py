"""FR on the route records' own bounds (no fleet block), against a brute-force recount (which imports
nothing of the monitor), and its cases one by one: per replica on merged traces, the block first."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.check import check_trace, check_traces
from rvguard.columnar import ColumnarTrace
from rvguard.events import Admit, Arrive, Complete, Dispatch, Event, Evict, Route, RouteMode
from rvguard.io import write_events
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline

from .strategies import small_contract

ENGINES = {"e0": 1, "e1": 2}
STALENESS = 0.5
BARE = small_contract(runbook=False)  # no fleet block: FR reads each route's own bounds

# one step: start request i on an engine (with a view this old, by a mode; routed before its dispatch,
# or late: after it), or end the oldest live one; times on a binary grid (multiples of 1/8), so view
# ages are exact and 0.5 is the bound itself
step = st.one_of(
    st.tuples(
        st.sampled_from(["start", "late"]),
        st.sampled_from(sorted(ENGINES)),
        st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5, 0.75])),
        st.sampled_from(["p2c", "siloed"]),
    ),
    st.tuples(st.just("end"), st.sampled_from(["complete", "evict"])),
)


def _start(
    t: float,
    rid: str,
    engine: str,
    view: float | None,
    mode: str = "p2c",
    late: bool = False,
    **bounds: float,
) -> list[Event]:
    route = Route(t, rid, engine, view, RouteMode(mode), extra=bounds)
    if late:  # the dispatch waited for an engine's slot: routed after it
        return [Arrive(t, rid, "o"), Admit(t, rid), Dispatch(t, rid), route]
    return [Arrive(t, rid, "o"), Admit(t, rid), route, Dispatch(t, rid)]


def _events(plan: list[tuple]) -> list[Event]:
    out: list[Event] = []
    live: list[str] = []
    t = 1.0
    for i, op in enumerate(plan):
        t += 0.125
        if op[0] in ("start", "late"):
            when, engine, age, mode = op
            rid = f"r{i}"
            view = None if age is None else t - age
            out += _start(
                t, rid, engine, view, mode, late=when == "late", staleness=STALENESS, slots=ENGINES[engine]
            )
            live.append(rid)
        elif live:
            rid = live.pop(0)
            out.append(Complete(t, rid) if op[1] == "complete" else Evict(t, rid, 10, "engine-down"))
    return out


def _recount(events: list[Event]) -> set[tuple[str, str]]:
    """Walk the trace: a route on a stale p2c view is "stale"; a request takes its engine's slot at its
    dispatch when routed, or at its route when routed late (after its dispatch), and finding C_e
    taken is "full" (a late route already "stale" is not also "full": one event, one verdict)."""
    expected: set[tuple[str, str]] = set()
    engine_of: dict[str, str] = {}
    dispatched: set[str] = set()
    holding: dict[str, str] = {}  # rid -> the engine whose slot it holds

    def take(rid: str, engine: str) -> None:
        if sum(e == engine for e in holding.values()) >= ENGINES[engine]:
            expected.add((rid, "full"))
        holding[rid] = engine

    for e in events:
        if isinstance(e, Route):
            engine_of[e.rid] = e.engine
            stale = e.mode is RouteMode.P2C and (e.view_time is None or e.t - e.view_time > STALENESS)
            if stale:
                expected.add((e.rid, "stale"))
            if e.rid in dispatched:  # late
                if stale:
                    holding[e.rid] = e.engine
                else:
                    take(e.rid, e.engine)
        elif isinstance(e, Dispatch):
            dispatched.add(e.rid)
            if e.rid in engine_of:
                take(e.rid, engine_of[e.rid])
        elif isinstance(e, Complete | Evict):
            holding.pop(e.rid, None)
    return expected


def _found(events: list[Event]) -> set[tuple[str, str]]:
    m = Monitor(BARE, ("WF", "FR"))
    m.feed_all(events)
    assert {v.property for v in m.violations()} <= {"FR"}
    return {(v.rid, "stale" if "view" in v.detail else "full") for v in m.violations()}


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=20))
def test_fr_equals_a_brute_force_recount(plan: list[tuple]) -> None:
    events = _events(plan)
    assert _found(events) == _recount(events)


@settings(max_examples=100, deadline=None)
@given(st.lists(step, max_size=20))
def test_offline_agrees_with_online_without_a_fleet_block(plan: list[tuple]) -> None:
    events = _events(plan)
    online = Monitor(BARE, ("WF", "FR"))
    online.feed_all(events)
    offline = check_offline(ColumnarTrace.from_events(events), BARE, ("WF", "FR"))
    assert sorted(v.key for v in offline.violations) == sorted(v.key for v in online.violations())


def test_engines_are_counted_per_trace(tmp_path: Path) -> None:
    """Two replicas each hold C_e = 1 on the same engine: no violation; one replica doing both: one."""
    a, b, both = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "both.jsonl"
    write_events(a, _start(1.0, "A/x", "e0", 1.0, staleness=1.0, slots=1))
    write_events(b, _start(1.0, "B/x", "e0", 1.0, staleness=1.0, slots=1))
    write_events(
        both,
        [
            *_start(1.0, "A/x", "e0", 1.0, staleness=1.0, slots=1),
            *_start(1.0, "A/y", "e0", 1.0, staleness=1.0, slots=1),
        ],
    )
    merged = check_traces([str(a), str(b)], BARE)
    assert merged.violations == [] and "FR" in merged.properties
    alone = check_traces([str(both), str(b)], BARE)
    assert [(v.property, v.rid) for v in alone.violations] == [("CAP", "A/y"), ("FR", "A/y")]
    assert all("C_e = 1" in v.detail for v in alone.violations)  # CAP: the route's slots, per replica


def test_a_route_without_bounds_is_judged_on_nothing() -> None:
    assert _found(_start(5.0, "x", "e0", None) + _start(5.0, "y", "e0", None)) == set()


def test_the_contract_block_comes_before_the_route_bounds() -> None:
    """The block's staleness 0.25 and e0's C_e = 1 judge routes that carry looser bounds of their own."""
    fleet = small_contract()
    assert fleet.fleet is not None and fleet.fleet.staleness == 0.25 and fleet.fleet.engines["e0"] == 1
    events = _start(1.0, "x", "e0", 0.5, staleness=1.0, slots=5) + _start(
        1.0, "y", "e0", 1.0, staleness=1.0, slots=5
    )
    m = Monitor(fleet, ("FR",))
    m.feed_all(events)
    assert [(v.rid, "staleness 0.25" in v.detail or "C_e = 1" in v.detail) for v in m.violations()] == [
        ("x", True),
        ("y", True),
    ]


def test_check_judges_fr_whenever_the_trace_routes(tmp_path: Path) -> None:
    routed, plain = tmp_path / "routed.jsonl", tmp_path / "plain.jsonl"
    write_events(routed, _start(1.0, "x", "e0", 0.0, staleness=0.5, slots=1))
    write_events(plain, [Arrive(1.0, "x", "o"), Admit(1.0, "x"), Dispatch(1.0, "x")])
    report = check_trace(str(routed), BARE, properties=["AF", "WF"])
    assert report.properties == ("AF", "WF", "FR")
    assert [v.property for v in report.violations] == [
        "FR"
    ] and "1 s old > staleness 0.5" in report.violations[0].detail
    assert check_trace(str(plain), BARE, properties=["AF", "WF"]).properties == ("AF", "WF")
