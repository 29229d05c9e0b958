"""``trace-replay``: the real public traces under the guard (reject, demote) and admit-all.

Why real traces: Poisson arrivals never straddle a window edge with a
burst twenty times the mean rate; the Azure code trace does (interarrival
CV ≈ 14.7), and that is where the regulator (``excess: reject`` or
``demote``) and the window origin matter. The Azure conversation trace is
the calm control (CV ≈ 1). Mooncake's timestamps are 3 s batches, replayed
as recorded, so each batch arrives at one instant: interarrival CV ≈ 2.9,
the closest of the three to the study's BurstGPT replay (CV 2.94).

Setup (stated rule): each trace is replayed open-loop over its whole slice,
time-scaled to ``RATE`` req/s; a request is assured with probability
min(1, (Σ B/W)/RATE) (`rvguard.sim.workloads.ShareRule`, seeded by the rep;
with several floored tenants, split by floor, and the rest shared equally by
the unfloored ones), so the assured tenants are offered about their floor
rate on average and far more in a burst; outputs are capped at the
contract's 48 tokens. Rep ``r`` changes the tenant draw and the service
noise, not the arrival times.

The contract (`REPLAY_CONTRACT`) is the marquee's with what 48-token
outputs need: s_max = s_max_opp = 1.4 s (the model's 48-token batch-4
service is ≈ 0.91 s mean), floor B = 3 per 1 s (ρ_a = 3·1.4/4 ≈ 1.05 at the
ceiling, ≈ 0.7 at the mean) and D = 4.2 s for both tenants. It is outside
the verified region on purpose (A4 fails at the ceiling), as a real
deployment's contract might be.

Arms: the guard under ``excess: reject`` and ``excess: demote``, and
admit-all (unguarded: the learner admits everything, FIFO, no floor), the
study's comparison (offered-basis unmet ≈ 0.33 guarded vs ≈ 0.9 admit-all,
floor-entitled attainment 1.00 vs 0.08–0.13).

Reported per condition: the admitted assured miss (demoted excess counts
as admitted), the offered-basis unmet fraction, the floor-entitled
attainment against the contract's origin, and the phase sweep's worst
attainment over 8 shifted origins.

``slices`` — the study's per-slice burstiness study: 8 non-overlapping
slices, one run each (the slice is the replication unit), guarded (reject)
and admit-all; per slice its interarrival CV and offered-basis unmet, and
the tie-corrected Spearman rank correlation between CV and the guard's
unmet with its exact permutation p-value. The study cut 8 slices of one
BurstGPT trace (CV 0.85–2.75); the public slices here are the calm Azure
conversation trace (CV ≈ 1) and Mooncake (CV ≈ 2.9), so `SLICES` takes
the first four of eight equal cuts of each: CV 1.0–2.9, a like span.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..contract import Contract, ExcessPolicy, contract_from_mapping
from ..data import TRACES as BUNDLED_TRACES
from ..enforce.request import Request
from ..errors import SpecError
from .experiments import ExperimentResult, require_roles, sojourns
from .run import run_once
from .runner import Arm, Runner, run_arms
from .workloads import replay

__all__ = ["REPLAY_CONTRACT", "TRACES", "trace_replay", "traces_dir"]

RATE = 8.0
TRACES: dict[str, tuple[str, str]] = {  # name → (file, regime)
    "azure_code": ("azure_code_slice.csv", "bursty"),
    "azure_conv": ("azure_conv_slice.csv", "calm"),
    "mooncake": ("mooncake_conv_slice.jsonl", "batched"),
}
REPLAY_CONTRACT = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 4,
        "output_cap": 48,
        "service": {"s_max": 1.4, "s_max_opp": 1.4, "lower": 0.236},
        "tenants": {
            "assured": {"floor": 3, "deadline": 4.2, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 4.2, "tier": 1},
        },
    },
    source="replay",
)


def traces_dir() -> Path:
    """Where the public trace slices are: ``$RVGUARD_TRACES`` when set, else the ones rvguard ships.

    Raises:
        SpecError: ``$RVGUARD_TRACES`` names a directory without the slices.
    """
    chosen = os.environ.get("RVGUARD_TRACES")
    where = Path(chosen) if chosen else BUNDLED_TRACES
    if not (where / TRACES["azure_code"][0]).is_file():
        raise SpecError(
            f"trace-replay: no public trace slices in {where} (RVGUARD_TRACES); "
            "unset it to use the bundled ones",
            field="traces",
        )
    return where


def _arrivals(arm: Arm, seed: int, rep: int) -> list[Request]:
    """Rep ``rep``'s replay (`run_arms` reads each trace once per rep; reject and demote share it)."""
    path = traces_dir() / TRACES[arm.load["trace"]][0]
    c = arm.contract
    return replay(
        path, c, rate=RATE, duration=arm.load.get("duration"), seed=seed * 1000 + rep, output_cap=c.output_cap
    )


def _arm(contract: Contract, trace: str, excess: str, duration: float | None = None) -> Arm:
    load = {"trace": trace, "duration": duration}
    if excess == "admit-all":
        params = {"trace": trace, "regime": TRACES[trace][1], "arm": "admit-all", "guard": False}
        return Arm(
            params, contract, {"mode": "unguarded", "learner": "admit-all"}, {"trace": trace}, phase=True
        )
    c = contract.model_copy(update={"excess": ExcessPolicy(excess)})
    params = {"trace": trace, "regime": TRACES[trace][1], "arm": f"guard-{excess}", "guard": True}
    return Arm(params, c, {"mode": "guarded", "learner": "admit-all"}, load, phase=True)


def trace_replay(
    contract: Contract,
    *,
    reps: int = 10,
    seed: int = 0,
    duration: float | None = None,
    runner: Runner | None = None,
) -> ExperimentResult:
    """Each public trace: guarded under ``excess: reject`` and ``demote``, and admit-all.

    ``duration`` replays only each slice's first seconds (the tests' short form).
    """
    require_roles(contract, "trace-replay", opportunistic=False)
    arms = [_arm(contract, t, arm, duration) for t in TRACES for arm in ("reject", "demote", "admit-all")]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed, arrivals=_arrivals)
    series = []
    for excess in ("reject", "demote"):
        arm = _arm(contract, "azure_code", excess, duration)
        out = run_once(arm.contract, _arrivals(arm, seed, 0), seed=seed * 1000, **arm.run)
        series.append(sojourns(out.result.events, arm.contract, f"azure_code, {excess}"))
    return ExperimentResult(
        "trace-replay", tuple(conditions), tuple(series), x_key="trace", group_keys=("arm",)
    )
