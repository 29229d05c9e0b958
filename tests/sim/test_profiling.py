"""Closed-loop profiling: the latency at load n holds the queue beyond C (oracle: deterministic service)."""

from __future__ import annotations

import random

import pytest

from rvguard.sim.backend import DeterministicService
from rvguard.sim.profiling import PER_LOAD, closed_loop, profile_samples


@pytest.mark.parametrize(("load", "latency"), [(1, 1.0), (4, 1.0), (8, 2.0), (12, 3.0)])
def test_closed_loop_latency_is_services_times_waves(load: int, latency: float) -> None:
    """With a 1 s service and C = 4, n = 4k outstanding requests are served in k waves of one second."""
    xs = closed_loop(DeterministicService(1.0), random.Random(0), load, 10, slots=4)
    assert xs == pytest.approx([latency] * 10)


def test_closed_loop_mean_latency_obeys_littles_law() -> None:
    """Between multiples of C, the mean latency is n/C services (C completions a second, n outstanding)."""
    xs = closed_loop(DeterministicService(1.0), random.Random(0), 5, 40, slots=4)
    assert sum(xs) / len(xs) == pytest.approx(5 / 4)


def test_profile_has_the_study_count_and_loads() -> None:
    samples = profile_samples(DeterministicService(0.5), random.Random(0), slots=4)
    assert len(samples) == 3 * 4 * PER_LOAD == 132
    assert [n for n, _ in samples[::PER_LOAD]] == [float(n) for n in range(1, 13)]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="load"):
        closed_loop(DeterministicService(1.0), random.Random(0), 0, 1, slots=4)
