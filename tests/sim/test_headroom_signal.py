"""The seeded headroom signal: the faults it promises are there, and the same seed draws the same run."""

from __future__ import annotations

import itertools
import random

import pytest

from rvguard.sim.headroom_signal import SignalModel, quiet_run, surge_run


def test_a_seeded_run_is_reproducible() -> None:
    a = quiet_run(SignalModel(), random.Random("s"), 200)
    b = quiet_run(SignalModel(), random.Random("s"), 200)
    assert a == b


def test_the_run_has_jitter_glitches_duplicates_and_stale_repeats() -> None:
    model = SignalModel(glitch_rate=0.1, duplicate_rate=0.1, stale_rate=0.1, noise=0.0)
    run = quiet_run(model, random.Random(1), 300)
    times = [s.t for s in run]
    fresh = [s for i, s in enumerate(run) if all(s.t > p.t for p in run[:i])]
    offsets = {round(s.t - round(s.t / 15.0) * 15.0, 6) for s in fresh}
    assert len(offsets) > 50 and max(abs(o) for o in offsets) <= 0.3  # jittered, within ± jitter
    assert sum(a == b for a, b in itertools.pairwise(times)) > 5  # duplicates: same timestamp
    assert any(b < a for a, b in itertools.pairwise(times))  # stale: an older one again
    assert sum(s.value < 0.1 for s in fresh) > 10  # glitches: level 0.5 − depth 0.45


def test_a_surge_crosses_h_min_when_it_says() -> None:
    model = SignalModel(noise=0.0, glitch_rate=0.0, jitter=0.0, duplicate_rate=0.0, stale_rate=0.0)
    run, surge = surge_run(model, random.Random(2), 200, h_min=0.2, ramp=120.0, low=0.05)
    before = [s.value for s in run if s.t < surge.crossing - 1e-9]
    after = [s.value for s in run if s.t > surge.crossing + 1e-9]
    assert min(before) >= 0.2 - 1e-9 and max(after) < 0.2


def test_bad_profiles_are_refused() -> None:
    with pytest.raises(ValueError, match="jitter"):
        SignalModel(jitter=8.0)
    with pytest.raises(ValueError, match="glitch_rate"):
        SignalModel(glitch_rate=1.5)
    with pytest.raises(ValueError, match="low < h_min < level"):
        surge_run(SignalModel(), random.Random(0), 10, h_min=0.6)
