"""run_once and its factories: modes, learners, and the LSQ learner's light-load calibration."""

from __future__ import annotations

import random

import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.sim.backend import BackendModel
from rvguard.sim.baselines import FifoBaseline
from rvguard.sim.run import calibration_samples, make_learner, make_policy, run_once

from ._common import MARQUEE, marquee_arrivals


def test_factories() -> None:
    assert isinstance(make_policy("guarded", MARQUEE), DecisionCore)
    assert make_policy("gated-fifo", MARQUEE).dispatch_policy == "fifo"  # type: ignore[attr-defined]
    assert isinstance(make_policy("unguarded", MARQUEE), FifoBaseline)
    with pytest.raises(ValueError, match="unknown mode"):
        make_policy("nope", MARQUEE)
    with pytest.raises(ValueError, match="unknown learner"):
        make_learner("nope", MARQUEE, random.Random(0), model=BackendModel())


def test_lsq_calibration_sees_service_not_queueing() -> None:
    samples = calibration_samples(BackendModel(), random.Random(0))
    assert max(s for _, s in samples) < 0.8  # no sample includes a queueing delay
    learner = make_learner("lsq", MARQUEE, random.Random(0), beta=2.0, model=BackendModel())
    assert learner.predict(8) < 1.82  # so it admits into a queue that will miss


def test_run_once_judges_its_trace() -> None:
    out = run_once(MARQUEE, marquee_arrivals(0, duration=3.0), learner="admit-all", seed=1)
    assert out.metrics.events == len(out.result.events)
    assert out.metrics.admitted_judged > 0
