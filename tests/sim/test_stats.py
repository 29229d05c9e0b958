"""Clopper–Pearson intervals: exact values, and the run-clustered pooling."""

from __future__ import annotations

import math

import pytest

from rvguard.sim.stats import (
    MIN_INFORMATIVE_RUNS,
    beta_quantile,
    clopper_pearson,
    pooled_interval,
    regularized_beta,
)


def test_known_clopper_pearson_values() -> None:
    lo, hi = clopper_pearson(5, 20)
    assert lo == pytest.approx(0.0866, abs=1e-4)
    assert hi == pytest.approx(0.4910, abs=1e-4)
    assert clopper_pearson(0, 40) == (0.0, pytest.approx(1 - 0.025 ** (1 / 40), abs=1e-9))
    assert clopper_pearson(40, 40)[1] == 1.0


def test_beta_cdf_and_quantile_invert() -> None:
    assert regularized_beta(0.5, 2.0, 2.0) == pytest.approx(0.5)
    assert regularized_beta(0.3, 1.0, 1.0) == pytest.approx(0.3)
    q = beta_quantile(0.9, 3.5, 7.25)
    assert regularized_beta(q, 3.5, 7.25) == pytest.approx(0.9, abs=1e-9)


def test_zero_misses_counts_runs_not_requests() -> None:
    p, (lo, hi) = pooled_interval([0] * 10, [70] * 10)
    assert p == 0.0 and lo == 0.0
    assert hi == pytest.approx(1 - 0.025 ** (1 / 10))


def test_clustered_interval_wider_than_naive_when_runs_disagree() -> None:
    missed, judged = [0, 60, 0, 60], [60, 60, 60, 60]
    p, (lo, hi) = pooled_interval(missed, judged)
    naive = clopper_pearson(120, 240)
    assert p == 0.5
    assert hi - lo > naive[1] - naive[0]


def test_a_few_missing_runs_never_narrow_the_interval_below_a_perfect_record() -> None:
    """One miss in one of 40 runs must not look better bounded than no miss at all."""
    judged = [72] * 40
    _, (_, perfect) = pooled_interval([0] * 40, judged)
    previous = perfect
    for runs_with_a_miss in range(1, MIN_INFORMATIVE_RUNS):
        missed = [1] * runs_with_a_miss + [0] * (40 - runs_with_a_miss)
        p, (lo, hi) = pooled_interval(missed, judged)
        assert p == pytest.approx(runs_with_a_miss / 2880)
        assert lo <= p <= hi and hi >= previous >= perfect
        previous = hi


def test_informative_runs_use_the_between_run_variance() -> None:
    """With misses spread over many runs the design effect is estimated: narrower than runs-as-trials."""
    missed, judged = [1, 0] * 20, [72] * 40
    p, (lo, hi) = pooled_interval(missed, judged)
    runs_as_trials = clopper_pearson(p * 40, 40)
    assert lo <= p <= hi and hi - lo < runs_as_trials[1] - runs_as_trials[0]


def test_bad_inputs() -> None:
    assert pooled_interval([], []) == (None, (0.0, 1.0))
    with pytest.raises(ValueError, match="0 ≤ x ≤ n"):
        clopper_pearson(5, 3)
    assert math.isclose(clopper_pearson(0, 0)[1], 1.0)
