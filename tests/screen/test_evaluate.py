"""screen-eval's numbers, recomputed independently on a small known grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rvguard.screen import Workload, screen
from rvguard.screen.evaluate import (
    Config,
    EvalResult,
    conditions,
    default_grid,
    evaluate,
    regime_of,
    small_grid,
)
from rvguard.screen.queueing import ServiceDistribution

REPS = 3


@pytest.fixture(scope="module")
def result() -> EvalResult:
    return evaluate(small_grid(), reps=REPS, duration=8.0, seed=1)


def _p95(xs: list[float]) -> float:
    ys = sorted(xs)
    return ys[math.ceil(0.95 * len(ys)) - 1]


def _predict(cfg: Config, services: list[float], dial: str) -> float:
    a, o = cfg.rates
    w = Workload({"assured": a, "opportunistic": o}, ServiceDistribution.of(services), policy=cfg.policy)  # type: ignore[arg-type]
    return screen(cfg.contract(), w, percentile=dial).tenants[0].p95


def _count(pred: float, measured: float, counts: dict[str, int]) -> None:
    for f in np.geomspace(0.5, 2.0, 30):
        d = measured * f
        accept, holds = pred <= d, measured <= d
        counts["tp"] += accept and holds
        counts["fp"] += accept and not holds
        counts["fn"] += holds and not accept


@pytest.mark.parametrize("dial", ["p50", "mean", "p99"])
def test_in_sample_precision_recall_recomputed(result: EvalResult, dial: str) -> None:
    counts = {"tp": 0, "fp": 0, "fn": 0}
    for r in result.runs:
        sojourns = [s for rep in r.reps for s in rep.sojourns]
        services = [s for rep in r.reps for s in rep.services]
        _count(_predict(r.config, services, dial), _p95(sojourns), counts)
    s = result.row("in-sample", dial).score
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    assert (s.accepts, s.false_accepts, s.holds) == (tp + fp, fp, tp + fn)
    assert s.cells == 30 * len(result.runs)
    assert s.precision == (tp / (tp + fp) if tp + fp else None)
    assert s.recall == (tp / (tp + fn) if tp + fn else None)
    if s.precision is not None and s.precision_ci is not None:
        assert s.precision_ci[0] <= s.precision <= s.precision_ci[1]


def test_held_out_recomputed(result: EvalResult) -> None:
    counts = {"tp": 0, "fp": 0, "fn": 0}
    for r in result.runs:
        for i in range(REPS):
            test = [s for j, rep in enumerate(r.reps) if j != i for s in rep.sojourns]
            _count(_predict(r.config, list(r.reps[i].services), "p99"), _p95(test), counts)
    s = result.row("held-out", "p99").score
    assert (s.accepts, s.false_accepts) == (counts["tp"] + counts["fp"], counts["fp"])
    assert s.cells == 30 * REPS * len(result.runs)


def test_regimes_partition_the_grid(result: EvalResult) -> None:
    for scope in ("in-sample", "held-out"):
        whole = result.row(scope, "mean").score
        parts = [result.row(scope, "mean", g).score for g in ("below", "knee", "overload")]
        assert sum(p.cells for p in parts) == whole.cells
        assert sum(p.false_accepts for p in parts) == whole.false_accepts
    assert [regime_of(x) for x in (0.5, 0.9, 1.29, 1.3)] == ["below", "knee", "knee", "overload"]


def test_conditions_follow_design_8(result: EvalResult) -> None:
    conds = conditions(result)
    assert len(conds) == len(result.runs)
    for c in conds:
        assert {"params", "reps", "assured_miss", "assured_miss_ci"} <= set(c)
        assert c["reps"] == REPS


def test_grid_and_validation() -> None:
    grid = default_grid()
    assert len(grid) == 40 and len(set(grid)) == 40
    assert Config(4, "priority", 1.0).floor == 6
    a, o = Config(4, "priority", 0.4).rates
    assert a == pytest.approx(o)
    with pytest.raises(ValueError, match="2 reps"):
        evaluate(small_grid()[:1], reps=1)
