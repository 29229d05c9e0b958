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
    contract = make_contract(slots=1, floor=4, s_max=2.0, window=1.0)  # needs 4/s; one slot of 1 s = 1/s
    core = DecisionCore(contract, watch=WatchConfig(on_alert=seen.append, sustain=2, alpha=1.0))
    core.arrive(Request("a", "assured", 0.0), YES, 0.0)
    core.finish("a", 1.0)
    core.poll(1.5)
    assert seen == []  # one low window is not yet sustained
    core.poll(3.5)
    assert [a.kind for a in seen] == ["capacity"]
    assert seen[0].value == pytest.approx(1.0)
    assert seen[0].limit == pytest.approx(4.0)


def test_no_degrade_by_default_and_config_validation() -> None:
    core = DecisionCore(make_contract(slots=1, floor=2, s_max=0.5), watch=WatchConfig(sustain=1))
    core.arrive(Request("a", "assured", 0.0), YES, 0.0)
    core.finish("a", 0.9)
    assert core.statistics().floor_scale == 1.0
    assert core.statistics().alerts == 1
    for bad in ({"sustain": 0}, {"alpha": 0.0}, {"degrade": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            WatchConfig(**bad)  # type: ignore[arg-type]
