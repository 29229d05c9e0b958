"""Precision and recall of the screen's accept verdict, with intervals clustered by configuration.

Why clustered: the 20–40 deadlines of one configuration are re-thresholds of
the same measured runs, so their verdicts are not independent trials. The
bootstrap resamples whole configurations (with replacement), sums their
confusion counts and recomputes the ratios; the interval is the 2.5 % and
97.5 % nearest-rank percentiles of the resampled ratios (resamples where a
ratio is undefined — no accept, or no holding cell — are left out of that
ratio's distribution).

Terms, per cell (configuration × deadline): *accept* = predicted P95 ≤ D;
*holds* = measured P95 ≤ D. precision = TP/(TP + FP), recall = TP/(TP + FN),
coverage = accepts / cells.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Confusion", "Score", "score"]

BOOT = 2000
SEED = 7


@dataclass(frozen=True, slots=True)
class Confusion:
    """Confusion counts of one configuration's cells."""

    tp: int
    fp: int
    fn: int
    tn: int

    @classmethod
    def of(cls, accept: Sequence[bool], holds: Sequence[bool]) -> Confusion:
        """Count the four outcomes of paired verdicts."""
        pairs = list(zip(accept, holds, strict=True))
        return cls(
            tp=sum(a and h for a, h in pairs),
            fp=sum(a and not h for a, h in pairs),
            fn=sum(h and not a for a, h in pairs),
            tn=sum(not a and not h for a, h in pairs),
        )


@dataclass(frozen=True, slots=True)
class Score:
    """Precision, recall and coverage over a set of configurations."""

    configs: int
    cells: int
    accepts: int
    false_accepts: int
    holds: int
    precision: float | None
    precision_ci: tuple[float, float] | None
    recall: float | None
    recall_ci: tuple[float, float] | None

    @property
    def coverage(self) -> float | None:
        """Share of cells the screen accepts."""
        return None if self.cells == 0 else self.accepts / self.cells

    def to_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        return {
            "configs": self.configs,
            "cells": self.cells,
            "accepts": self.accepts,
            "false_accepts": self.false_accepts,
            "holds": self.holds,
            "coverage": self.coverage,
            "precision": self.precision,
            "precision_ci": None if self.precision_ci is None else list(self.precision_ci),
            "recall": self.recall,
            "recall_ci": None if self.recall_ci is None else list(self.recall_ci),
        }


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def _interval(num: npt.NDArray[np.float64], den: npt.NDArray[np.float64]) -> tuple[float, float] | None:
    ok = den > 0
    if not ok.any():
        return None
    vals = np.sort(num[ok] / den[ok])
    n = vals.size
    return float(vals[max(0, math.ceil(0.025 * n) - 1)]), float(vals[max(0, math.ceil(0.975 * n) - 1)])


def score(per_config: Sequence[Confusion], *, resamples: int = BOOT) -> Score:
    """Pooled precision/recall over configurations, with the configuration-clustered bootstrap."""
    k = len(per_config)
    if k == 0:
        return Score(0, 0, 0, 0, 0, None, None, None, None)
    m = np.array([[c.tp, c.fp, c.fn, c.tn] for c in per_config], dtype=np.float64)
    tp, fp, fn, tn = m.sum(axis=0)
    rng = np.random.default_rng(SEED)
    draws = rng.multinomial(k, np.full(k, 1.0 / k), size=resamples).astype(np.float64)
    boot = draws @ m  # resamples × 4
    return Score(
        configs=k,
        cells=int(tp + fp + fn + tn),
        accepts=int(tp + fp),
        false_accepts=int(fp),
        holds=int(tp + fn),
        precision=_ratio(tp, tp + fp),
        precision_ci=_interval(boot[:, 0], boot[:, 0] + boot[:, 1]),
        recall=_ratio(tp, tp + fn),
        recall_ci=_interval(boot[:, 0], boot[:, 0] + boot[:, 2]),
    )
