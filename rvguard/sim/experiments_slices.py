"""``slices``: per-slice burstiness against the guard's unmet fraction (the study's 8-slice study).

Why: the study's trace-replay unmet (0.33 at CV 2.94) is burst excess the
fixed floor rejects, so it should grow with burstiness. It cut 8
non-overlapping slices of one bursty trace (interarrival CV 0.85–2.75), ran
each once (the slice is the replication unit), and found the guard's unmet
0.05–0.35, the burstiest missing most, but a rank correlation that is not
significant (tie-corrected Spearman ρ ≈ 0.47, n = 8, p = 0.24), and
admit-all a flat ≈ 0.9.

Here (`rvguard.sim.experiments_replay` for the setup: `REPLAY_CONTRACT`,
8 req/s, assured with probability 3/8): `SLICES` are the first four of
eight equal cuts of the calm Azure conversation slice (CV ≈ 1) and of the
Mooncake slice (CV ≈ 2.9): a span like the study's, from two traces rather
than one (no BurstGPT slice ships with the project). Each slice runs
guarded (reject) and admit-all; the result's ``spearman`` entry holds ρ and
its exact permutation p over the guarded arm's 8 slices.
"""

from __future__ import annotations

import itertools
import statistics

from ..contract import Contract
from ..enforce.request import Request
from .experiments import ExperimentResult, require_roles
from .experiments_replay import RATE, TRACES, traces_dir
from .runner import Arm, Runner, run_arms
from .stats import spearman
from .workloads import public_rows, replay

__all__ = ["CUTS", "SLICES", "slice_cv", "slices"]

CUTS = 8
SLICES: tuple[tuple[str, int], ...] = tuple(
    (trace, k) for trace in ("azure_conv", "mooncake") for k in range(4)
)


def _bounds(trace: str, k: int) -> tuple[int, int]:
    n = len(public_rows(traces_dir() / TRACES[trace][0]))
    size = n // CUTS
    return k * size, (k + 1) * size


def slice_cv(trace: str, k: int) -> float:
    """Interarrival coefficient of variation of slice ``k`` of ``trace`` (time scale does not change it)."""
    lo, hi = _bounds(trace, k)
    ts = [r.t for r in public_rows(traces_dir() / TRACES[trace][0])[lo:hi]]
    gaps = [b - a for a, b in itertools.pairwise(ts)]
    return statistics.pstdev(gaps) / statistics.fmean(gaps)


def _arrivals(arm: Arm, seed: int, rep: int) -> list[Request]:
    trace, k = arm.load["trace"], arm.load["cut"]
    path = traces_dir() / TRACES[trace][0]
    c = arm.contract
    return replay(path, c, rate=RATE, seed=seed * 1000 + rep, output_cap=c.output_cap, rows=_bounds(trace, k))


def slices(
    contract: Contract, *, reps: int = 1, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Each slice once (``reps`` > 1 repeats the tenant draw), guarded and admit-all; ρ(CV, unmet)."""
    require_roles(contract, "slices", opportunistic=False)
    arms = []
    for trace, k in SLICES:
        cv = round(slice_cv(trace, k), 3)
        for name, mode in (("guard", "guarded"), ("admit-all", "unguarded")):
            params = {"slice": f"{trace}#{k}", "cv": cv, "arm": name, "guard": mode == "guarded"}
            arms.append(
                Arm(params, contract, {"mode": mode, "learner": "admit-all"}, {"trace": trace, "cut": k})
            )
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed, arrivals=_arrivals)
    guarded = [c for c in conditions if c.params["guard"]]
    cvs = [float(c.params["cv"]) for c in guarded]
    unmet = [c.offered_unmet or 0.0 for c in guarded]
    rho, p = spearman(cvs, unmet)
    info = {"spearman": {"rho": rho, "p": p, "n": len(guarded), "x": "cv", "y": "guard offered_unmet"}}
    return ExperimentResult("slices", tuple(conditions), (), x_key="cv", group_keys=("arm",), info=info)
