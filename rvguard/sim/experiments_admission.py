"""Admission policy experiments: what to do with burst excess, and what a credit should count.

* ``demote-vs-reject`` — the regulator for assured burst excess beyond B.
  The study (BurstGPT replay at ρ < 1, so priority and deferred drop stay
  inert; only admission is exercised): at a loose deadline (factor 2.5)
  demote recovers the excess (offered-basis unmet 0.35 → 0.05); at a tight
  one (factor 1.5) the demoted excess holds slots the next window's floor
  needs (floor met-fraction 0.77 → 0.69). Here: the two calm/bursty public
  slices (`rvguard.sim.experiments_replay.TRACES`; Mooncake's interarrival
  CV ≈ 2.9 is the closest to BurstGPT's 2.94), every request assured,
  replayed at the floor rate B/W for 600 s (ρ ≈ 0.7 at 48 tokens), D = factor × the
  model's clean batch-C service at the 48-token cap, factors 1.5 … 3.
* ``token-credits`` — bimodal assured sizes: each window offers exactly
  B = 3 assured (paced), a fraction `LARGE_FRACTION` of them `LARGE`
  tokens long (infeasible at D), the rest 16. The count meter admits the
  large ones (they are floor-entitled by the letter of count AF) and they
  hold the C slots non-preemptively, so the small ones miss too (the study:
  admitted-basis miss 0.62 on V100, 0.69 in its deterministic-slot model).
  The token meter (w(R) = output tokens, B = 3 × 48 tokens) sheds a large
  request as cost-excess: admitted-basis miss 0, but offered-basis unmet
  equal to the large fraction (the study: 0.38) — an AF trade, not a win.
"""

from __future__ import annotations

import random

from ..contract import Contract, CreditMode, ExcessPolicy
from ..enforce.request import Request
from .backend import BackendModel
from .experiments import ExperimentResult, require_roles
from .experiments_replay import TRACES, traces_dir
from .runner import Arm, Runner, run_arms, with_floored
from .workloads import floor_rate, paced, replay

__all__ = ["DEADLINE_FACTORS", "LARGE", "LARGE_FRACTION", "demote_vs_reject", "token_credits"]

DEADLINE_FACTORS: tuple[float, ...] = (1.5, 2.0, 2.5, 3.0)
DEMOTE_TRACES: tuple[str, ...] = ("azure_conv", "mooncake")
LARGE, SMALL, LARGE_FRACTION = 256, 16, 0.38
TOKEN_FLOOR_REQUESTS, TOKEN_DURATION = 3, 12.0
DEMOTE_DURATION = 600.0  # seconds of each replayed slice (≈ 1 800 requests at 3/s)


def _replay_arrivals(arm: Arm, seed: int, rep: int) -> list[Request]:
    """The slice's first `DEMOTE_DURATION` s, every request assured, at the floor rate B/W."""
    c = arm.contract
    path = traces_dir() / TRACES[arm.load["trace"]][0]
    rate = floor_rate(c)
    return replay(
        path, c, rate=rate, duration=DEMOTE_DURATION, seed=seed * 1000 + rep, output_cap=c.output_cap
    )


def demote_vs_reject(
    contract: Contract,
    *,
    reps: int = 5,
    seed: int = 0,
    duration: float = DEMOTE_DURATION,
    runner: Runner | None = None,
) -> ExperimentResult:
    """Reject vs demote the assured burst excess, across deadline factors, on two replayed slices."""
    require_roles(contract, "demote-vs-reject", opportunistic=False)
    base = BackendModel(slots=contract.slots).mean_base(contract.output_cap, contract.slots)
    only_floored = contract.model_copy(
        update={"tenants": {n: t for n, t in contract.tenants.items() if t.floored}}
    )
    arms = []
    for trace in DEMOTE_TRACES:
        for factor in DEADLINE_FACTORS:
            for excess in ("reject", "demote"):
                c = with_floored(only_floored, deadline=round(factor * base, 3))
                c = c.model_copy(update={"excess": ExcessPolicy(excess)})
                params = {"trace": trace, "factor": factor, "excess": excess, "guard": True}
                load = {"trace": trace, "duration": duration}
                arms.append(Arm(params, c, {"mode": "guarded", "learner": "admit-all"}, load))
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed, arrivals=_replay_arrivals)
    info = {"deadline_base_s": base}
    return ExperimentResult(
        "demote-vs-reject", tuple(conditions), (), x_key="factor", group_keys=("trace", "excess"), info=info
    )


def _bimodal(arm: Arm, seed: int, rep: int) -> list[Request]:
    """Paced assured at B/W, each LARGE with probability LARGE_FRACTION (one seeded draw each)."""
    c = arm.contract
    rng = random.Random(f"arrivals:{seed}:{rep}")
    base = paced(c, rng, assured_rate=TOKEN_FLOOR_REQUESTS / c.window, opp_rate=0.0, duration=TOKEN_DURATION)
    return [
        Request(r.rid, r.tenant, r.t, max_tokens=LARGE if rng.random() < LARGE_FRACTION else SMALL)
        for r in base
    ]


def token_credits(
    contract: Contract, *, reps: int = 10, seed: int = 0, runner: Runner | None = None
) -> ExperimentResult:
    """Count vs token credits under bimodal assured sizes (module doc)."""
    require_roles(contract, "token-credits", opportunistic=False)
    count = with_floored(contract, floor=TOKEN_FLOOR_REQUESTS).model_copy(update={"output_cap": LARGE})
    tokens = with_floored(count, floor=TOKEN_FLOOR_REQUESTS * 48).model_copy(
        update={"credit": CreditMode.TOKENS}
    )
    arms = [
        Arm({"credit": name, "guard": True}, c, {"mode": "guarded", "learner": "admit-all"})
        for name, c in (("count", count), ("tokens", tokens))
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed, arrivals=_bimodal)
    info = {"large_tokens": LARGE, "small_tokens": SMALL, "large_fraction": LARGE_FRACTION}
    return ExperimentResult("token-credits", tuple(conditions), (), x_key="credit", info=info)
