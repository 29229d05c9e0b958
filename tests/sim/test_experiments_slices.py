"""slices: per-slice burstiness against the guard's unmet fraction, and the rank correlation."""

from __future__ import annotations

import pytest

from rvguard.errors import SpecError
from rvguard.sim.experiments_replay import REPLAY_CONTRACT, traces_dir
from rvguard.sim.experiments_slices import SLICES, slice_cv, slices


def test_slices_span_the_burstiness_and_report_the_rank_correlation() -> None:
    try:
        traces_dir()
    except SpecError:
        pytest.skip("public trace slices not available")
    result = slices(REPLAY_CONTRACT, reps=1, seed=0)
    guard = [c for c in result.conditions if c.params["guard"]]
    assert len(guard) == len(SLICES) == 8
    cvs = [c.params["cv"] for c in guard]
    assert min(cvs) < 1.5 < 2.5 < max(cvs)  # a span like the study's 0.85–2.75
    for c in result.conditions:
        assert c.reps == 1
    admit = [c for c in result.conditions if not c.params["guard"]]
    assert min(c.offered_unmet or 0.0 for c in admit) > max(c.offered_unmet or 0.0 for c in guard)
    sp = result.info["spearman"]
    assert -1.0 <= sp["rho"] <= 1.0 and 0.0 < sp["p"] <= 1.0 and sp["n"] == 8


def test_slice_cv_is_the_interarrival_cv() -> None:
    try:
        traces_dir()
    except SpecError:
        pytest.skip("public trace slices not available")
    assert 0.8 < slice_cv("azure_conv", 1) < 1.3
    assert 2.5 < slice_cv("mooncake", 1) < 3.2
