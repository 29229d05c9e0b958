"""Clopper–Pearson intervals: exact values, and the run-clustered pooling."""

from __future__ import annotations

import math

import pytest

from rvguard.sim.stats import beta_quantile, clopper_pearson, pooled_interval, regularized_beta


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


def test_bad_inputs() -> None:
    assert pooled_interval([], []) == (None, (0.0, 1.0))
    with pytest.raises(ValueError, match="0 ≤ x ≤ n"):
        clopper_pearson(5, 3)
    assert math.isclose(clopper_pearson(0, 0)[1], 1.0)
