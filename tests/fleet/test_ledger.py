"""The replica ledger: what one replica may spend alone, per tenant and window."""

from __future__ import annotations

import pytest

from rvguard.fleet.ledger import ReplicaLedger


def _ledger(reserve: float = 2.0, floor: float = 5.0, start: int = 0) -> ReplicaLedger:
    return ReplicaLedger({"a": reserve}, {"a": floor}, start_window=start)


def test_nothing_alone_in_the_start_window_and_the_next_nor_confirmed_in_the_start() -> None:
    led = _ledger(start=3)
    assert led.allowance("a", 3) == 0.0 and led.allowance("a", 4) == 0.0 and led.allowance("a", 2) == 0.0
    assert led.allowance("a", 5) == 2.0
    led.answered("a", 3, pooled=True)
    led.answered("a", 4, pooled=True)
    assert led.sending("a", 3)[2] is False  # its past life may have spent the reserve alone
    assert led.sending("a", 4)[2] is True


def test_static_spending_stops_at_the_reserve_and_says_why() -> None:
    led = _ledger()
    reasons = []
    for _ in range(6):
        led.arrive("a", 2, 1.0)
        reasons.append(led.spend_static("a", 2, 1.0))
    assert reasons == ["", "", "floor-lowered", "floor-lowered", "floor-lowered", "excess"]
    led._check()


def test_a_call_in_flight_or_lost_releases_nothing_but_an_answer_stops_spending_alone() -> None:
    led = _ledger()
    assert led.sending("a", 2) == (0.0, 0.0, False)  # no answer yet: no confirmation
    led.arrive("a", 2, 1.0)
    assert led.spend_static("a", 2, 1.0) == ""  # its call was lost: the reserve, alone
    assert led.sending("a", 2) == (1.0, 1.0, False)  # what to report
    led.answered("a", 2, pooled=True)
    assert led.sending("a", 2) == (1.0, 1.0, True)  # now it may confirm, with its final report
    led.arrive("a", 2, 1.0)
    assert led.spend_static("a", 2, 1.0) == "floor-lowered"
    assert not led.confirmed("a", 2)
    led.answered("a", 2, pooled=True, confirmed=True)
    assert led.confirmed("a", 2)
    led._check()


def test_a_fenced_or_invalid_answer_leaves_the_window_unanswered() -> None:
    led = _ledger()
    led.arrive("a", 2, 1.0)
    assert led.spend_static("a", 2, 1.0) == ""
    led.answered("a", 2, pooled=False)
    assert led.allowance("a", 2) == 1.0 and led.sending("a", 2)[2] is False


def test_old_windows_are_pruned() -> None:
    led = _ledger()
    led.arrive("a", 1, 1.0)
    led.arrive("a", 10, 1.0)
    assert ("a", 1) not in led._cells and ("a", 10) in led._cells


@pytest.mark.parametrize(("reserves", "floors"), [({"a": 6.0}, {"a": 5.0}), ({"a": 1.0}, {"b": 5.0})])
def test_bad_reserves_are_refused(reserves: dict[str, float], floors: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"reserve|different tenants"):
        ReplicaLedger(reserves, floors, start_window=0)
