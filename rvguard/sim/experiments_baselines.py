"""The native baselines a practitioner would try first: server-side priority and a static rate limit.

Why: the reference study's claim is that the guard's edge is the per-class
*reservation*, not a dispatch rule or rate limiting as such. Two baselines
test that, each on the marquee load (assured paced at B/W, the 14/s flood):

* ``server-priority`` — vLLM's ``--scheduling-policy priority`` in front of
  nothing: every request admitted, dispatched by tier, non-preemptive in a
  slot-bound regime (`FlowController` admitting all). Against the guard
  (admit-all learner) as the deadline tightens from the calibrated 1284 ms
  to 900 ms (the study: 0.0, then 0.15 / 0.26 / 0.46 where the guard held 0).
* ``rate-limit`` — a static limit per window, per class (assured at B, the
  opportunistic tenants sharing the rest of the server's capacity) or flat
  (that capacity over everyone, first come), FIFO behind it (the study:
  per-class 0.0, flat 0.75: the flood crowds assured out at admission).
  The capacity is C·W over the model's clean batch-C service at 16 tokens
  (`rvguard.sim.run.rate_limit_capacity`), what an operator would set.
"""

from __future__ import annotations

from ..contract import Contract
from .experiments import ExperimentResult, require_roles
from .runner import Arm, Runner, run_arms, with_floored

__all__ = ["SERVER_DEADLINES", "rate_limit", "server_priority"]

SERVER_DEADLINES: tuple[float, ...] = (1.284, 1.1, 1.0, 0.9)
SERVER_ARMS: dict[str, str] = {"guard": "guarded", "server-priority": "server-priority", "fifo": "unguarded"}
RATE_ARMS: dict[str, str] = {
    "guard": "guarded",
    "rate-limit-class": "rate-limit-class",
    "rate-limit-flat": "rate-limit-flat",
}


def server_priority(
    contract: Contract, *, reps: int = 10, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """The guard vs vLLM-style server priority (admit-all) vs plain FIFO, as D tightens."""
    require_roles(contract, "server-priority")
    arms = [
        Arm(
            {"deadline": d, "arm": name, "guard": mode == "guarded"},
            with_floored(contract, deadline=d),
            {"mode": mode, "learner": "admit-all"},
        )
        for d in SERVER_DEADLINES
        for name, mode in SERVER_ARMS.items()
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    return ExperimentResult("server-priority", tuple(conditions), (), x_key="deadline", group_keys=("arm",))


def rate_limit(
    contract: Contract, *, reps: int = 10, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """The guard vs a per-class and a flat static rate limit, at the marquee load."""
    require_roles(contract, "rate-limit")
    arms = [
        Arm({"arm": name, "guard": mode == "guarded"}, contract, {"mode": mode, "learner": "admit-all"})
        for name, mode in RATE_ARMS.items()
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    return ExperimentResult("rate-limit", tuple(conditions), (), x_key="arm")
