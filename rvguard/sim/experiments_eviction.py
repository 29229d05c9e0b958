"""``rvguard experiment relief-eviction``: the runbook's emergency ranking and crossover, simulated.

The livelock's memory-pressure model (`rvguard.sim.relief`, the contract of ``relief-livelock``)
run through the Guard's own eviction channels, carried out by the same core:

* **Emergency ranking.** Past the hard floor, bare preemption stops every running surplus request;
  the emergency channel (`rvguard.enforce.emergency`) evicts from the top of the runbook's ranking
  (S = prompt + generated, largest first) only while the credited headroom is below its target, at
  most k in flight. The experiment reports, beside each policy's surplus completed and stops, the
  mean S of the requests evicted against the mean S of the running surplus they were chosen from
  (read from the trace: each request's S at an eviction is the model's, from its ``dispatch``).
* **Crossover.** The voluntary channel (`rvguard.enforce.voluntary`) evicts a running surplus
  request when its expected remaining seconds times the opportunity rate (1 a second) exceed the
  cost of moving it (``fixed``, nothing per token here). A request's expected remaining time is at
  most its uninterrupted service (output / token rate), so a move dearer than that is never made:
  the sweep over ``fixed`` shows the evictions fall to none at the crossover, ``fixed`` = service.

Each condition runs once (the run is deterministic) and is judged by PR, EV, RL and WF (ER too:
an emergency eviction's relief against the node's deadline), the count of violations reported.

Cost: O(ticks · running) per condition; a 60 s run takes well under a second.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..contract import Contract
from ..events import Complete, Dispatch, Event, Evict, Fail
from ..runbook_events import EMERGENCY, VOLUNTARY
from .experiments_relief import DEFAULT_CONTRACT, measure, report_head
from .memory import PressureModel
from .relief import ReliefRun, default_prices, relief_contract, run_relief
from .run import judge

__all__ = ["FIXED_SHARES", "JUDGED", "NAME", "Command", "relief_eviction"]

NAME = "relief-eviction"
#: the properties the simulated trace is judged by (ER: emergency relief against the node's deadline)
JUDGED: tuple[str, ...] = ("PR", "EV", "ER", "RL", "WF")
#: the voluntary sweep's move costs, as shares of a request's uninterrupted service (1: the crossover)
FIXED_SHARES: tuple[float, ...] = (0.5, 0.9, 0.95, 1.0, 1.25)


def _at_evictions(events: Sequence[Event], model: PressureModel) -> dict[str, Any]:
    """What the trace shows of each channel's rule, every S the model's (prompt + min(output, rate ×
    time since ``dispatch``), not the channel's own count): the emergency evictions that took the
    largest S of the running surplus (to a token), and the least expected remaining time, in
    seconds of output still to come, of a voluntary eviction."""
    running: dict[str, float] = {}  # surplus rid -> dispatch time
    largest, emergency, remaining = 0, 0, []
    assured = f"c{model.clients}-"
    for ev in events:
        if isinstance(ev, Dispatch) and not ev.rid.startswith(assured):
            running[ev.rid] = ev.t
        elif isinstance(ev, Evict) and ev.reason == EMERGENCY:
            emergency += 1
            states = [
                model.prompt_tokens + min(model.output_tokens, model.token_rate * (ev.t - t))
                for t in running.values()
            ]
            largest += ev.state >= max(states) - 1
        elif isinstance(ev, Evict) and ev.reason == VOLUNTARY:
            remaining.append((model.output_tokens - (ev.state - model.prompt_tokens)) / model.token_rate)
        if isinstance(ev, Fail | Complete):
            running.pop(ev.rid, None)
    return {
        "evicted_emergency": emergency,
        "emergency_took_the_largest": largest,
        "evicted_voluntary": len(remaining),
        "least_remaining_evicted": round(min(remaining), 6) if remaining else None,
    }


def _condition(
    params: dict[str, Any], run: ReliefRun, violations: int, model: PressureModel
) -> dict[str, Any]:
    return {
        "params": params,
        "reps": 1,
        "surplus_completed": run.completed,
        "sustainable": run.sustainable,
        "stopped": run.preempted,
        **_at_evictions(run.events, model),
        "violations": violations,
    }


def relief_eviction(contract: Contract, model: PressureModel) -> list[dict[str, Any]]:
    """The conditions: preempt-all and the emergency channel, then the voluntary sweep over ``fixed``."""
    model = replace(model, output_tokens=min(model.output_tokens, contract.output_cap))
    out = []
    for policy in ("preempt-all", "emergency"):
        run = run_relief(contract, model, policy=policy)
        _, violations = judge(relief_contract(contract, policy=policy, model=model), run.events, JUDGED)
        out.append(_condition({"policy": policy}, run, len(violations), model))
    for share in FIXED_SHARES:
        fixed = share * model.service
        block = relief_contract(contract, policy="voluntary", model=model).eviction
        assert block is not None
        priced = contract.model_copy(
            update={"eviction": block.model_copy(update={"voluntary": default_prices(model, fixed)})}
        )
        run = run_relief(priced, model, policy="voluntary")
        _, violations = judge(relief_contract(priced, policy="voluntary", model=model), run.events, JUDGED)
        params = {"policy": "voluntary", "fixed": round(fixed, 6), "service": model.service}
        out.append(_condition(params, run, len(violations), model))
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard relief-eviction`` (``rvguard experiment relief-eviction``)."""
    d = PressureModel(capacity=2000)
    p.add_argument("--kv-capacity", type=int, default=d.capacity, help="KV cache tokens (default 2000)")
    p.add_argument("--clients", type=int, default=d.clients, help="closed-loop surplus clients (default 6)")
    p.add_argument("--duration", type=float, default=d.duration, help="seconds of load (default 60)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> bool:
    """Run every condition; print the table (or JSON). A measurement: always True."""
    model, conditions = measure(args, lambda m: relief_eviction(DEFAULT_CONTRACT, m))
    if report_head(NAME, model, conditions, as_json=args.json):
        return True
    for c in conditions:
        p = c["params"]
        label = p["policy"] + (f" fixed={p['fixed']:g}s (service {p['service']:g}s)" if "fixed" in p else "")
        least = c["least_remaining_evicted"]
        print(
            f"  {label:<36} surplus completed {c['surplus_completed']:>3}"
            f" (sustainable {c['sustainable']:.0f})"
            f"  stopped {c['stopped']:>3}  emergency evictions {c['evicted_emergency']:>3}"
            f" ({c['emergency_took_the_largest']} took the largest S)"
            f"  voluntary {c['evicted_voluntary']:>3}"
            f" (least remaining {'-' if least is None else f'{least:.2f} s'})"
            f"  {'/'.join(JUDGED)} violations {c['violations']}"
        )
    return True


class Command:
    """The plugin object `rvguard.cli.registry` loads."""

    add_arguments = staticmethod(add_arguments)
    run = staticmethod(run)
