"""run_once and its factories: modes, learners, and the LSQ learner's closed-loop fit."""

from __future__ import annotations

import random

import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.learners import LSQLearner
from rvguard.sim.backend import BackendModel
from rvguard.sim.baselines import FifoBaseline, FlowController, RateLimiter
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


def test_lsq_is_fitted_on_132_closed_loop_samples_that_include_queueing() -> None:
    samples = calibration_samples(BackendModel(), slots=4)
    assert len(samples) == 132  # the study's count
    assert {load for load, _ in samples} == set(map(float, range(1, 13)))
    by_load = {n: [s for load, s in samples if load == n] for n in (1.0, 12.0)}
    # beyond C the latency holds the queue wait: at load 3C about three services
    assert min(by_load[12.0]) > 2 * max(by_load[1.0])
    learner = make_learner("lsq", MARQUEE, random.Random(0), beta=1.0, model=BackendModel())
    assert isinstance(learner, LSQLearner) and learner.r2 > 0.9
    # so β moves the shedding threshold: the load at which it predicts the 1.82 s SLO halves from β=1 to β=2
    at = {
        beta: next(n for n in range(1, 200) if beta * learner.predict(n) / learner.beta > 1.82)
        for beta in (1, 2)
    }
    assert at[2] < at[1] < 3 * 12
    assert calibration_samples(BackendModel(), slots=4) is samples  # one profiling run per model


def test_rate_limit_and_server_priority_modes() -> None:
    flat = make_policy("rate-limit-flat", MARQUEE)
    per_class = make_policy("rate-limit-class", MARQUEE)
    assert isinstance(flat, RateLimiter) and isinstance(per_class, RateLimiter)
    assert isinstance(make_policy("server-priority", MARQUEE), FlowController)


def test_run_once_judges_its_trace() -> None:
    out = run_once(MARQUEE, marquee_arrivals(0, duration=3.0), learner="admit-all", seed=1)
    assert out.metrics.events == len(out.result.events)
    assert out.metrics.admitted_judged > 0
