"""The empirical assured P95 sojourn of a trace, with a bootstrap interval over whole windows.

Why whole windows: requests of one window share its queue, so their
sojourns are correlated; resampling single requests would make the interval
far too narrow. The bootstrap draws K of the K arrival windows (contract
windows) with replacement and recomputes the P95 of the pooled sojourns.

Definitions (shared by the online monitor and the offline checker, which
must agree exactly):

* the sample is every *judged admitted assured* request (the denominator of
  the admitted-basis miss fraction): its sojourn is ``complete − arrive``;
  a drop, a fail, or a deadline passed with no completion counts as +∞
  (it never met any deadline, so the estimate stays conservative);
* P95 is the nearest-rank percentile: the smallest x with at least 95 % of
  the sample ≤ x (so P95 ≤ D exactly when ≥ 95 % finished by D);
* the interval is the bootstrap percentile interval (nearest rank, 2.5 %
  and 97.5 %) over `RESAMPLES` resamples from a fixed seed, so it is a
  function of the sample alone. An endpoint that falls on a +∞ is reported
  as unbounded (``None`` with the ``*_unbounded`` flag: JSON has no ∞).

Cost: O(n log n + R·n) time for n sojourns and R resamples (chunked, so
memory O(n + 2²² ) in the bootstrap). The caller keeps the sample: 16 bytes
a judged admitted assured request (see `rvguard.monitors.metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["RESAMPLES", "SojournP95", "sojourn_p95"]

RESAMPLES = 400
SEED = 20240605
_CHUNK = 1 << 22


@dataclass(frozen=True, slots=True)
class SojournP95:
    """The assured P95 sojourn of a trace and its window-bootstrap 95 % interval.

    Attributes:
        judged: sojourns in the sample (= admitted assured requests judged).
        not_completed: of which dropped, failed or past their deadline (+∞).
        windows: distinct arrival windows among them (the bootstrap's units).
        p95: the nearest-rank P95 (s); None when no sample or when unbounded.
        p95_unbounded: the P95 falls on a request that never completed.
        ci_low, ci_high: the interval; None with fewer than 2 windows, or unbounded.
        ci_high_unbounded: the upper end falls on a non-completion.
        resamples: bootstrap resamples drawn.
    """

    judged: int
    not_completed: int
    windows: int
    p95: float | None
    p95_unbounded: bool
    ci_low: float | None
    ci_high: float | None
    ci_high_unbounded: bool
    resamples: int


def _rank(total: npt.NDArray[np.int64] | int) -> npt.NDArray[np.int64] | int:
    """ceil(0.95 · total) in exact integer arithmetic."""
    return (95 * total + 99) // 100


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def sojourn_p95(
    windows: Sequence[int] | npt.NDArray[np.int64],
    sojourns: Sequence[float] | npt.NDArray[np.float64],
    *,
    resamples: int = RESAMPLES,
) -> SojournP95:
    """P95 of ``sojourns`` (+∞ = never completed) with a bootstrap over their ``windows``.

    The result depends on the multiset of (window, sojourn) pairs only, not
    on their order.
    """
    w = np.asarray(windows, dtype=np.int64)
    s = np.asarray(sojourns, dtype=np.float64)
    n = int(s.size)
    if n == 0:
        return SojournP95(0, 0, 0, None, False, None, None, False, 0)
    order = np.lexsort((w, s))
    s, w = s[order], w[order]
    keys, w_idx = np.unique(w, return_inverse=True)
    k = int(keys.size)
    p95 = float(s[int(_rank(n)) - 1])
    lo = hi = math.nan
    if k >= 2:
        boot = _bootstrap(s, w_idx.reshape(-1), k, resamples)
        lo = float(boot[max(0, math.ceil(0.025 * resamples) - 1)])
        hi = float(boot[max(0, math.ceil(0.975 * resamples) - 1)])
    return SojournP95(
        judged=n,
        not_completed=int(np.isinf(s).sum()),
        windows=k,
        p95=_finite(p95),
        p95_unbounded=math.isinf(p95),
        ci_low=None if math.isnan(lo) else _finite(lo),
        ci_high=None if math.isnan(hi) else _finite(hi),
        ci_high_unbounded=math.isinf(hi),
        resamples=resamples if k >= 2 else 0,
    )


def _bootstrap(
    s: npt.NDArray[np.float64], w_idx: npt.NDArray[np.int64], k: int, resamples: int
) -> npt.NDArray[np.float64]:
    """Sorted P95s of ``resamples`` window resamples (weights = how often each window is drawn)."""
    rng = np.random.default_rng(SEED)
    counts = rng.multinomial(k, np.full(k, 1.0 / k), size=resamples).astype(np.int64)
    out = np.empty(resamples)
    step = max(1, _CHUNK // max(1, s.size))
    for start in range(0, resamples, step):
        weights = counts[start : start + step][:, w_idx]
        cum = np.cumsum(weights, axis=1)
        rank = _rank(cum[:, -1])
        idx = np.argmax(cum >= np.asarray(rank)[:, None], axis=1)
        out[start : start + step] = s[idx]
    out.sort()
    return out
