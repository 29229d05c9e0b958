"""The online assumption watch: service above its ceiling, low capacity, degrade and restore."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rvguard.contract import window_index
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.enforce.watch import Alert, AssumptionWatch, WatchConfig, _interior
from rvguard.events import Admit, Basis, Proposal, Reject

from ._harness import make_contract

YES = Proposal()


def test_service_above_ceiling_alerts_and_degrades_then_restores() -> None:
    seen: list[Alert] = []
    contract = make_contract(slots=4, floor=2, s_max=0.5)
    core = DecisionCore(contract, watch=WatchConfig(on_alert=seen.append, sustain=1, degrade=0.5))
    core.arrive(Request("a", "assured", 0.0), YES, 0.0)
    core.finish("a", 0.9)  # service 0.9 > s_max 0.5
    assert [a.kind for a in seen] == ["service"]
    assert seen[0].value == pytest.approx(0.9)
    assert core.statistics().floor_scale == 0.5
    # floor lowered to 1 while firing: "a" used it, so the window's second assured is refused
    assert core.arrive(Request("b", "assured", 0.95), YES, 0.95)[1] == Reject(0.95, "b", "floor-lowered")
    # a quiet window later the watch clears and the floor is back
    core.poll(2.5)
    assert [a.kind for a in seen] == ["service", "clear"]
    assert core.statistics().floor_scale == 1.0
    assert core.arrive(Request("c", "assured", 2.5), YES, 2.5)[1] == Admit(2.5, "c", Basis.FLOOR)
    assert len(core.alerts) == 2


def test_sustained_low_capacity_alerts() -> None:
    seen: list[Alert] = []
    # needs 4/s; one slot of 1 s = 1/s (D = 4 s covers one request after a blocking one: no backlog alert)
    contract = make_contract(slots=1, floor=4, s_max=2.0, window=1.0, deadline=4.0)
    core = DecisionCore(contract, watch=WatchConfig(on_alert=seen.append, sustain=2, alpha=1.0))
    core.arrive(Request("a", "assured", 0.0), YES, 0.0)
    core.finish("a", 1.0)
    core.poll(1.5)
    assert seen == []  # one low window is not yet sustained
    core.poll(3.5)
    assert [a.kind for a in seen] == ["capacity"]
    assert seen[0].value == pytest.approx(1.0)
    assert seen[0].limit == pytest.approx(4.0)


def test_backlog_above_what_the_deadline_covers_alerts() -> None:
    """Σ B = 4 on 2 slots, but D = 1.0 s with s_max 0.5 s covers one wave after a blocking job:
    N_D = 2 · ⌊(1.0 − 0.5) / 0.5⌋ = 2, so a third admitted assured request is a backlog alert."""
    seen: list[Alert] = []
    core = DecisionCore(
        make_contract(slots=2, floor=4, s_max=0.5, deadline=1.0), watch=WatchConfig(on_alert=seen.append)
    )
    for rid in "abc":
        core.arrive(Request(rid, "assured", 0.0), YES, 0.0)
    assert [(a.kind, a.value, a.limit) for a in seen] == [("backlog", 3.0, 2.0)]
    # mutation: a deadline that covers two waves (N_D = 4 = Σ B): the same three raise nothing
    quiet: list[Alert] = []
    roomy = DecisionCore(
        make_contract(slots=2, floor=4, s_max=0.5, deadline=1.5), watch=WatchConfig(on_alert=quiet.append)
    )
    for rid in "abc":
        roomy.arrive(Request(rid, "assured", 0.0), YES, 0.0)
    assert quiet == []


@pytest.mark.parametrize(
    ("slots", "floor", "s_max", "deadline", "bound"),
    [
        (2, 2, 0.5, 1.5, 2),  # N_D = 2·⌊1.0/0.5⌋ = 4: Σ B = 2 binds
        (2, 4, 0.5, 1.0, 2),  # N_D = 2·⌊0.5/0.5⌋ = 2
        (2, 4, 0.5, 0.3, 0),  # D below one service: nothing is covered
        (4, 6, 0.66, 1.82, 4),  # the study's marquee: one wave of 4 after a blocking job, not B = 6
        (4, 6, 0.66, 1.98, 6),  # 1.98 = 0.66 + 2·0.66 exactly: two waves
    ],
)
def test_the_backlog_bound_is_what_the_floors_and_the_deadline_both_cover(
    slots: int, floor: int, s_max: float, deadline: float, bound: int
) -> None:
    contract = make_contract(slots=slots, floor=floor, s_max=s_max, deadline=deadline)
    assert contract.backlog_bound() == bound


def test_no_degrade_by_default_and_config_validation() -> None:
    core = DecisionCore(make_contract(slots=1, floor=2, s_max=0.5), watch=WatchConfig(sustain=1))
    core.arrive(Request("a", "assured", 0.0), YES, 0.0)
    core.finish("a", 0.9)
    assert core.statistics().floor_scale == 1.0
    assert core.statistics().alerts == 1
    for bad in ({"sustain": 0}, {"alpha": 0.0}, {"degrade": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            WatchConfig(**bad)  # type: ignore[arg-type]


# -- the tick's fast path: a tick inside the window of the last one changes nothing ----------------

_ORIGINS = st.sampled_from([0.0, 0.3, 1_796_599_038.118, -7.25])
_WINDOWS = st.sampled_from([0.001, 0.1, 1.0, 2.0, 60.0, 3600.0])


@given(origin=_ORIGINS, window=_WINDOWS, k=st.integers(-(10**6), 10**6), u=st.floats(0.0, 1.0))
def test_the_interior_of_a_window_is_in_it_by_the_exact_index(
    origin: float, window: float, k: int, u: float
) -> None:
    """Every time of `_interior(k)` (its ends too) is in window k by `window_index`, the exact rule."""
    lo, hi = _interior(k, origin, window)
    assume(lo <= hi)
    for t in (lo, hi, lo + u * (hi - lo)):
        assert window_index(t, origin, window) == k, (t, lo, hi)


_STEP = st.tuples(
    st.floats(0.0, 1.5),  # time since the last step (windows of 1 s)
    st.sampled_from(["tick", "service", "gap", "backlog+", "backlog-"]),
    st.floats(0.0, 3.0),  # a service or gap length
)


@settings(max_examples=300)
@given(steps=st.lists(_STEP, max_size=60), origin=_ORIGINS)
def test_the_tick_fast_path_changes_nothing(steps: list[tuple[float, str, float]], origin: float) -> None:
    """The same observations fed to two watches, one of them made to decide every tick the long
    way (its interior forgotten before each call): the same alerts, records and floor scale."""
    contract = make_contract(slots=2, floor=2, s_max=0.5, window=1.0, deadline=1.0)
    config = WatchConfig(sustain=2, alpha=0.5, degrade=0.5)
    fast, slow = (AssumptionWatch(contract, config, origin=origin) for _ in range(2))
    now = origin + 10.0
    for gap, what, value in steps:
        now += gap
        for watch in (fast, slow):
            if watch is slow:
                watch._inside = (math.inf, -math.inf)
            if what == "tick":
                watch.tick(now)
            elif what == "service":
                watch.observe_service("assured", value, 1.0, now, 0.1)
            elif what == "gap":
                watch.arrival_gap(value / 10, now)
            else:
                watch.backlog(1 if what == "backlog+" else -1, now)
        assert (fast.alerts, fast.firing, fast.floor_scale) == (slow.alerts, slow.firing, slow.floor_scale)
    assert fast.drain() == slow.drain()
