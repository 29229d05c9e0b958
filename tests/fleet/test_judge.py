"""The fleet AF judge against a brute-force recount (which imports nothing of it)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.events import Admit, Arrive, Basis, Event, Reject
from rvguard.fleet.judge import FleetCredits

from ._pool import pool_contract

FLOOR = 3
WINDOW = 1.0

# one request: time step, pooled (with its pool count) or not, and how it ended
request = st.tuples(
    st.floats(0.0, 0.6),
    st.one_of(st.none(), st.integers(1, 2 * FLOOR)),
    st.sampled_from(["floor", "excess", "floor-lowered", "surplus"]),
)


def _events(plan: list[tuple[float, int | None, str]]) -> list[Event]:
    out: list[Event] = []
    t = 0.0
    for i, (step, pooled, end) in enumerate(plan):
        t += step
        rid = f"r{i}"
        extra = {} if pooled is None else {"pool_arrived": float(pooled), "credit": "shared"}
        out.append(Arrive(t, rid, "gold", extra=extra))
        if end == "floor":
            out.append(Admit(t, rid, Basis.FLOOR))
        elif end == "surplus":
            out.append(Admit(t, rid, Basis.DEMOTED))
        else:
            out.append(Reject(t, rid, end))
    return out


def _recount(events: list[Event]) -> set[tuple[str, str]]:
    """Expected violations by brute force: (rid, 'credits' | 'refused')."""
    arrivals: dict[str, Arrive] = {e.rid: e for e in events if isinstance(e, Arrive)}
    expected: set[tuple[str, str]] = set()
    for e in events:
        a = arrivals[e.rid]
        k = math.floor(a.t / WINDOW)
        if isinstance(e, Admit) and e.basis is Basis.FLOOR:
            before = [
                x
                for x in events
                if isinstance(x, Admit)
                and x.basis is Basis.FLOOR
                and math.floor(arrivals[x.rid].t / WINDOW) == k
                and events.index(x) <= events.index(e)
            ]
            if len(before) > FLOOR:
                expected.add((e.rid, "credits"))
        if isinstance(e, Reject):
            pooled: Any = a.extra.get("pool_arrived")
            if pooled is not None:
                entitled = pooled <= FLOOR
            else:
                same = [x for x in arrivals.values() if math.floor(x.t / WINDOW) == k]
                entitled = sorted(same, key=lambda x: (x.t, int(x.rid[1:]))).index(a) < FLOOR
            if entitled:
                expected.add((e.rid, "refused"))
    return expected


@settings(max_examples=300, deadline=None)
@given(st.lists(request, max_size=14))
def test_judge_equals_a_brute_force_recount(plan: list[tuple[float, int | None, str]]) -> None:
    events = _events(plan)
    judge = FleetCredits(pool_contract(FLOOR, window=WINDOW))
    found = set()
    for e in events:
        for v in judge.feed(e):
            assert v.property == "AF"
            found.add((v.rid, "credits" if "fleet floor credit" in v.detail else "refused"))
    assert found == _recount(events)
    most = judge.summary().max_credits["gold"]
    floors: dict[int, int] = {}
    for e in events:
        if isinstance(e, Admit) and e.basis is Basis.FLOOR:
            k = math.floor(next(a.t for a in events if isinstance(a, Arrive) and a.rid == e.rid) / WINDOW)
            floors[k] = floors.get(k, 0) + 1
    assert most == max(floors.values(), default=0)


def test_pool_order_overrides_trace_order() -> None:
    """Two replicas' arrivals a microsecond apart reached the pool the other way round."""
    judge = FleetCredits(pool_contract(1, window=WINDOW))
    first = Arrive(0.5, "b-g0", "gold", extra={"pool_arrived": 2.0})  # second in the pool: excess
    second = Arrive(0.500001, "a-g0", "gold", extra={"pool_arrived": 1.0})
    out = [*judge.feed(first), *judge.feed(second)]
    out += judge.feed(Reject(0.5, "b-g0", "excess")) + judge.feed(Admit(0.500001, "a-g0", Basis.FLOOR))
    assert out == []  # by trace order b-g0 was entitled and refused: a false AF violation
