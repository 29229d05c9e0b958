"""FR against a brute-force recount (which imports nothing of it), and its cases one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.events import Complete, Dispatch, Event, Evict, Route, RouteMode
from rvguard.fleet.fr import FleetRouting

ENGINES = {"e0": 1, "e1": 2}
STALENESS = 0.5

# one step: start request i on an engine (with a view this old, by a mode), or end the oldest live one
step = st.one_of(
    st.tuples(
        st.just("start"),
        st.sampled_from(sorted(ENGINES)),
        st.one_of(st.none(), st.sampled_from([0.0, 0.2, 0.5, 0.7])),
        st.sampled_from(["p2c", "siloed"]),
    ),
    st.tuples(st.just("end"), st.sampled_from(["complete", "evict"])),
)


def _events(plan: list[tuple]) -> list[Event]:
    out: list[Event] = []
    live: list[str] = []
    t = 1.0
    for i, op in enumerate(plan):
        t += 0.1
        if op[0] == "start":
            _, engine, age, mode = op
            rid = f"r{i}"
            view = None if age is None else t - age
            extra = {"staleness": STALENESS, "slots": ENGINES[engine]}
            out += [Route(t, rid, engine, view, RouteMode(mode), extra=extra), Dispatch(t, rid)]
            live.append(rid)
        elif live:
            rid = live.pop(0)
            out.append(Complete(t, rid) if op[1] == "complete" else Evict(t, rid, 10, "engine-down"))
    return out


def _recount(events: list[Event]) -> set[tuple[str, str]]:
    expected: set[tuple[str, str]] = set()
    engine_of: dict[str, str] = {}
    for i, e in enumerate(events):
        if isinstance(e, Route):
            engine_of[e.rid] = e.engine
            stale = e.view_time is None or e.t - e.view_time > STALENESS + 1e-9
            if e.mode is RouteMode.P2C and stale:
                expected.add((e.rid, "stale"))
        if isinstance(e, Dispatch):
            engine = engine_of[e.rid]
            started = [
                x.rid for x in events[: i + 1] if isinstance(x, Dispatch) and engine_of[x.rid] == engine
            ]
            ended = {x.rid for x in events[: i + 1] if isinstance(x, Complete | Evict)}
            if len([r for r in started if r not in ended]) > ENGINES[engine]:
                expected.add((e.rid, "full"))
    return expected


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=20))
def test_fr_equals_a_brute_force_recount(plan: list[tuple]) -> None:
    events = _events(plan)
    fr = FleetRouting()
    found = set()
    for e in events:
        for v in fr.feed(e, "a.jsonl"):
            assert v.property == "FR"
            found.add((v.rid, "stale" if "view" in v.detail else "full"))
    assert found == _recount(events)


def test_engines_are_counted_per_trace() -> None:
    """Two replicas each hold C_e = 1 on the same engine: no violation."""
    fr = FleetRouting()
    out = []
    for source in ("a.jsonl", "b.jsonl"):
        route = Route(1.0, "x", "e0", 1.0, extra={"staleness": 1.0, "slots": 1})
        out += fr.feed(route, source) + fr.feed(Dispatch(1.0, "x"), source)
    assert out == []


def test_a_route_without_bounds_is_judged_on_nothing() -> None:
    fr = FleetRouting()
    assert fr.feed(Route(5.0, "x", "e0", None)) == [] and fr.feed(Dispatch(5.0, "x")) == []
