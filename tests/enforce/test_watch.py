"""The online assumption watch: service above its ceiling, low capacity, degrade and restore."""

from __future__ import annotations

import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.enforce.watch import Alert, WatchConfig
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
