"""``rvguard experiment reserve-sweep``: the reserved buffer's trade, assured miss against surplus throughput.

Why this load: the reserve matters when surplus work holds slots for long (the runbook's
long, memory-hungry generations). The guard is non-preemptive, so a floor request that
arrives while every slot runs a long surplus generation waits for one to end; with R slots
reserved, surplus never holds more than C − R of them. So the surplus (unfloored) requests
here ask for `SURPLUS_TOKENS` output tokens (the contract's ``output_cap`` is raised to let
them), the floored ones for the marquee's 16; the load is otherwise the marquee's
(`rvguard.sim.loads`: floored tenants at Σ B/W, paced and Poisson; the unfloored flood at
14/s) over `DURATION` s, with the admit-all learner, so all of the surplus is offered.

For each R from 0 to C (same arrivals in every arm of a rep: the paired design), it
reports the assured miss (admitted basis, 95 % run-clustered Clopper–Pearson), the surplus
throughput (unfloored requests completed by the last arrival, per second: the mean over
runs, with the runs' min and max) and the RB violations (none: the core enforces RB).
The plot: miss against R, and surplus throughput against R.

What to expect (`rvguard verify` on the marquee: R = 2 is the smallest reserve that meets
D = 1.82 s): the miss falls as R grows; surplus throughput stays near its R = 0 value while
the reserve is within what the floor itself keeps busy, and falls beyond it, to 0 at R = C.
"""

from __future__ import annotations

import dataclasses
import statistics

from ..contract import Contract
from ..enforce.request import Request
from .experiments import STREAMS, ExperimentResult, require_roles
from .record import Condition
from .runner import Arm, Runner, default_arrivals, run_arms

__all__ = ["DURATION", "SURPLUS_TOKENS", "reserve_sweep"]

SURPLUS_TOKENS = 256
DURATION = 30.0


def _arrivals(arm: Arm, seed: int, rep: int) -> list[Request]:
    """The marquee load, the unfloored tenants' requests asking for `SURPLUS_TOKENS` tokens."""
    floored = set(arm.contract.floored_tenants)
    return [
        r if r.tenant in floored else dataclasses.replace(r, max_tokens=SURPLUS_TOKENS)
        for r in default_arrivals(arm, seed, rep)
    ]


def _with_throughput(c: Condition) -> Condition:
    """The condition with its surplus throughput and RB count in ``info`` (reported and plotted)."""
    rates = [r.opp_done / r.span for r in c.runs if r.span > 0]
    info = {
        **c.info,
        "surplus_throughput": statistics.fmean(rates) if rates else None,
        "surplus_throughput_range": [min(rates), max(rates)] if rates else None,
        "rb_violations": sum(r.rb for r in c.runs),
    }
    return Condition(c.params, c.runs, info)


def reserve_sweep(
    contract: Contract, *, reps: int = 10, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Assured miss and surplus throughput for every reserve R = 0..C, paced and Poisson floors."""
    require_roles(contract, "reserve-sweep")
    base = contract.model_copy(update={"output_cap": max(contract.output_cap, SURPLUS_TOKENS)})
    arms = [
        Arm(
            {"reserve": r, "assured": stream, "guard": True, "learner": "admit-all"},
            base.model_copy(update={"reserve": r}),
            {"mode": "guarded", "learner": "admit-all"},
            {"assured": stream, "duration": DURATION},
        )
        for stream in STREAMS
        for r in range(contract.slots + 1)
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed, arrivals=_arrivals)
    return ExperimentResult(
        "reserve-sweep",
        tuple(_with_throughput(c) for c in conditions),
        x_key="reserve",
        group_keys=("assured",),
        info={"surplus_tokens": SURPLUS_TOKENS, "duration": DURATION},
        panel=("surplus_throughput", "surplus throughput (completed/s)"),
    )
