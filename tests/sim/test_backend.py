"""The backend model against the reference study's calibration points (DESIGN §7)."""

from __future__ import annotations

import random

import pytest

from rvguard.sim.backend import CALIBRATION, Backend, BackendModel
from rvguard.sim.calibration import measure
from rvguard.sim.run import run_once
from rvguard.sim.workloads import poisson

from ._common import MARQUEE


def test_model_matches_calibration_points() -> None:
    got = measure(BackendModel())
    for point in CALIBRATION:
        rel = abs(got[point.name] - point.target) / point.target
        assert rel <= point.tolerance, f"{point.name}: model {got[point.name]:.3f} vs {point.target:.3f}"


def test_service_grows_with_batch_and_tokens() -> None:
    m = BackendModel()
    assert m.mean_base(16, 1) < m.mean_base(16, 2) < m.mean_base(16, 4)
    assert m.mean_base(16, 4) < m.mean_base(48, 4)


def test_batch_cap_cuts_throughput() -> None:
    full = BackendModel()
    capped = BackendModel(batch_cap=2)
    assert capped.mean_base(16, 4) == pytest.approx(2 * full.mean_base(16, 4))
    flood = poisson(MARQUEE, random.Random(4), assured_rate=6.0, opp_rate=30.0, duration=30.0)
    a = run_once(MARQUEE, flood, model=full).result
    b = run_once(MARQUEE, flood, model=capped).result
    assert b.end_time > 1.5 * a.end_time


def test_prefill_stall_pushes_back_running_requests() -> None:
    b = Backend(BackendModel(sigma=0.0, stall=0.01), random.Random(0))
    ((_rid, t1, v1),) = b.start("a", 16, 0.0)
    changed = b.start("b", 16, 0.1)
    assert ("a", pytest.approx(t1 + 0.01)) in [(r, t) for r, t, _ in changed]
    assert not b.current("a", v1)
    with pytest.raises(ValueError, match="already running"):
        b.start("a", 16, 0.2)


def test_invalid_model_rejected() -> None:
    with pytest.raises(ValueError, match="batch_cap"):
        BackendModel(batch_cap=0)
    with pytest.raises(ValueError, match="non-negative"):
        BackendModel(sigma=-1.0)
