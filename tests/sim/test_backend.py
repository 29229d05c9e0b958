"""The continuous-batching backend: exact progress on hand-worked cases, and the calibration points."""

from __future__ import annotations

import random

import pytest

from rvguard.sim.backend import CALIBRATION, BackendModel, BatchingBackend
from rvguard.sim.calibration import measure
from rvguard.sim.run import run_once
from rvguard.sim.workloads import poisson

from ._common import MARQUEE

# a noiseless engine with round numbers: 10 ms per request outside, 40 ms prefill, step 10 ms + 2 ms/sequence
PLAIN = BackendModel(overhead=0.01, prefill=0.04, step=0.01, step_per_seq=0.002, sigma=0.0)


def _drain(b: BatchingBackend) -> dict[str, float]:
    done: dict[str, float] = {}
    while (t := b.next_time()) is not None:
        done.update((rid, t) for rid in b.advance(t))
    return done


def test_model_matches_calibration_points() -> None:
    got = measure(BackendModel())
    for point in CALIBRATION:
        rel = abs(got[point.name] - point.target) / point.target
        assert rel <= point.tolerance, f"{point.name}: model {got[point.name]:.3f} vs {point.target:.3f}"


def test_solo_request_is_overhead_prefill_and_its_steps() -> None:
    b = PLAIN.backend(random.Random(0))
    b.start("a", 16, None, 1.0)
    assert _drain(b) == {"a": pytest.approx(1.0 + 0.04 + 16 * 0.012 + 0.01)}


def test_a_dispatch_pauses_the_batch_for_its_prefill_then_slows_it() -> None:
    """By hand: a decodes alone from 0.04 s, b's prefill pauses it, then both decode at 14 ms a step."""
    b = PLAIN.backend(random.Random(0))
    b.start("a", 10, None, 0.0)
    b.start("b", 10, None, 0.1)  # a has decoded (0.1 − 0.04)/0.012 = 5 tokens
    # b's prefill runs 0.10–0.14; then a's 5 left and b's 10 at 0.014 s/token each
    a_end = 0.14 + 5 * 0.014
    b_end = a_end + 5 * 0.012  # a leaves the batch: b alone again
    assert _drain(b) == {"a": pytest.approx(a_end + 0.01), "b": pytest.approx(b_end + 0.01)}


def test_prompt_tokens_cost_prefill() -> None:
    long = BackendModel(
        overhead=0.0, prefill=0.01, prefill_per_token=0.001, step=0.01, step_per_seq=0.0, sigma=0.0
    )
    b = long.backend(random.Random(0))
    b.start("a", 1, 100, 0.0)
    assert _drain(b) == {"a": pytest.approx(0.01 + 0.1 + 0.01)}


def test_service_grows_with_batch_and_tokens() -> None:
    m = BackendModel()
    assert m.mean_base(16, 1) < m.mean_base(16, 2) < m.mean_base(16, 4)
    assert m.mean_base(16, 4) < m.mean_base(48, 4)


def test_batch_cap_cuts_throughput() -> None:
    full = BackendModel()
    capped = BackendModel(batch_cap=2)
    assert capped.decode_rate(4) == pytest.approx(
        full.decode_rate(4) * full.step_time(4) / capped.step_time(4) / 2
    )
    flood = poisson(MARQUEE, random.Random(4), assured_rate=6.0, opp_rate=30.0, duration=30.0)
    a = run_once(MARQUEE, flood, model=full).result
    b = run_once(MARQUEE, flood, model=capped).result
    assert b.end_time > 1.3 * a.end_time


def test_noise_factor_is_clamped() -> None:
    m = BackendModel(sigma=2.0)
    rng = random.Random(0)
    xs = [m.factor(rng) for _ in range(2000)]
    assert min(xs) == m.min_factor and max(xs) == m.max_factor


def test_invalid_model_rejected() -> None:
    with pytest.raises(ValueError, match="batch_cap"):
        BackendModel(batch_cap=0)
    with pytest.raises(ValueError, match="non-negative"):
        BackendModel(sigma=-1.0)
    with pytest.raises(ValueError, match="min_factor"):
        BackendModel(min_factor=1.2)
    b = PLAIN.backend(random.Random(0))
    b.start("a", 4, None, 0.0)
    with pytest.raises(ValueError, match="already running"):
        b.start("a", 4, None, 0.0)
