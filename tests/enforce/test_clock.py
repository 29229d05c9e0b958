"""Clocks (rvguard/clock.py): monotonic live time and manual test time."""

from __future__ import annotations

import time

import pytest

from rvguard.clock import Clock, ManualClock, MonotonicClock, WallClock


def test_monotonic_clock_starts_at_start_and_never_goes_back() -> None:
    c = MonotonicClock(start=5.0)
    a, b = c.now(), c.now()
    assert 5.0 <= a <= b < 6.0
    assert isinstance(c, Clock)


def test_manual_clock_moves_only_forward() -> None:
    c = ManualClock(1.0)
    assert c.advance(0.5) == 1.5
    c.set(2.0)
    assert c.now() == 2.0
    with pytest.raises(ValueError, match="backwards"):
        c.advance(-0.1)
    with pytest.raises(ValueError, match="backwards"):
        c.set(1.0)
    assert c.now() == 2.0


def test_wall_clock_is_unix_time() -> None:
    before = time.time()
    assert before <= WallClock().now() <= time.time()
    assert isinstance(WallClock(), Clock)
