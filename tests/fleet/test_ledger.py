"""The replica ledger: what one replica may spend alone, per tenant and window."""

from __future__ import annotations

import pytest

from rvguard.fleet.ledger import ReplicaLedger


def _ledger(reserve: float = 2.0, floor: float = 5.0, start: int = 0) -> ReplicaLedger:
    return ReplicaLedger({"a": reserve}, {"a": floor}, start_window=start)


def test_the_start_window_and_earlier_count_as_joined() -> None:
    led = _ledger(start=3)
    assert led.may_have_joined("a", 3) and led.may_have_joined("a", 2)
    assert led.allowance("a", 3) == 0.0
    assert not led.may_have_joined("a", 4)
    assert led.allowance("a", 4) == 2.0


def test_static_spending_stops_at_the_reserve_and_says_why() -> None:
    led = _ledger()
    reasons = []
    for _ in range(6):
        led.arrive("a", 1, 1.0)
        reasons.append(led.spend_static("a", 1, 1.0))
    assert reasons == ["", "", "floor-lowered", "floor-lowered", "floor-lowered", "excess"]
    led._check()


def test_a_call_in_flight_or_lost_counts_as_joined() -> None:
    led = _ledger()
    assert led.sending("a", 1) == (0.0, 0.0)
    assert led.allowance("a", 1) == 0.0  # in flight: it may join
    led.answered("a", 1, joined=None)  # lost: it may have joined
    assert led.may_have_joined("a", 1)
    led.arrive("a", 1, 1.0)
    assert led.spend_static("a", 1, 1.0) == "floor-lowered"


def test_a_fenced_answer_leaves_the_window_unjoined() -> None:
    led = _ledger()
    led.arrive("a", 1, 1.0)
    assert led.spend_static("a", 1, 1.0) == ""
    assert led.sending("a", 1) == (1.0, 1.0)  # what to report on joining
    led.answered("a", 1, joined=False)
    assert led.allowance("a", 1) == 1.0


def test_old_windows_are_pruned() -> None:
    led = _ledger()
    led.arrive("a", 1, 1.0)
    led.arrive("a", 10, 1.0)
    assert ("a", 1) not in led._cells and ("a", 10) in led._cells


@pytest.mark.parametrize(("reserves", "floors"), [({"a": 6.0}, {"a": 5.0}), ({"a": 1.0}, {"b": 5.0})])
def test_bad_reserves_are_refused(reserves: dict[str, float], floors: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"reserve|different tenants"):
        ReplicaLedger(reserves, floors, start_window=0)
