"""``rvguard experiment relief-livelock``: preempt-all against rationed relief under memory pressure.

Issue 24's livelock, simulated (`rvguard.sim.relief`): closed-loop surplus clients on an engine
whose KV grows with the tokens generated, more of them than the cache holds above its redline.
Past the hard floor, bare preemption stops every running surplus request and the redline restores
them all together when it clears: they grow together, cross together and are stopped together,
and surplus completes close to nothing. Rationed relief stops the fewest and restores as the
headroom allows, so surplus completes near what the engine holds: the sustainable level
(`PressureModel.sustainable` above ``h_min``, less the floored clients' share, over the run).

Each policy runs once (the run is deterministic) and is judged by PR, EV, RL and WF: the counts of
their violations are reported beside the completions (none expected: relief goes through the core).

Cost: O(ticks · running) per policy; a 60 s run takes well under a second.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TypeVar

from ..contract import Contract
from ..errors import RvguardError, SpecError
from .memory import PressureModel
from .relief import ReliefRun, relief_contract, run_relief
from .run import judge

__all__ = ["DEFAULT_CONTRACT", "JUDGED", "NAME", "Command", "relief_livelock"]

T = TypeVar("T")

NAME = "relief-livelock"
#: the two policies the livelock compares (the eviction channels: ``rvguard experiment relief-eviction``)
POLICIES: tuple[str, ...] = ("ration", "preempt-all")
#: the properties the simulated trace is judged by
JUDGED: tuple[str, ...] = ("PR", "EV", "RL", "WF")
#: 8 slots, an assured tenant with a small floor, and the opportunistic surplus
DEFAULT_CONTRACT = Contract.model_validate(
    {
        "epoch": 0.0,
        "window": 1.0,
        "slots": 8,
        "output_cap": 512,
        "service": {"s_max": 10.0, "s_max_opp": 10.0, "lower": 0.1},
        "tenants": {
            "assured": {"floor": 2, "deadline": 30.0, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 30.0, "tier": 1},
        },
    }
)


def relief_livelock(
    contract: Contract, model: PressureModel, *, hold_bound: float
) -> dict[str, tuple[ReliefRun, int]]:
    """Each policy's run and its count of violations of `JUDGED`, by policy name."""
    judged = relief_contract(contract)
    out: dict[str, tuple[ReliefRun, int]] = {}
    for policy in POLICIES:
        run = run_relief(contract, model, policy=policy, hold_bound=hold_bound)
        _, violations = judge(judged, run.events, JUDGED)
        out[policy] = (run, len(violations))
    return out


def _condition(policy: str, run: ReliefRun, violations: int) -> dict[str, Any]:
    return {
        "params": {"policy": policy},
        "reps": 1,
        "surplus_completed": run.completed,
        "sustainable": run.sustainable,
        "ceiling": run.ceiling,
        "preempted": run.preempted,
        "hold_bound_answers": run.bounded,
        "max_held_seconds": run.max_held,
        "violations": violations,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard relief-livelock`` (``rvguard experiment relief-livelock``)."""
    d = PressureModel(capacity=2000)
    p.add_argument("--kv-capacity", type=int, default=d.capacity, help="KV cache tokens (default 2000)")
    p.add_argument("--clients", type=int, default=d.clients, help="closed-loop surplus clients (default 6)")
    p.add_argument("--duration", type=float, default=d.duration, help="seconds of load (default 60)")
    p.add_argument("--hold-bound", type=float, default=10.0, help="seconds a request may stay held (10)")
    p.add_argument("--json", action="store_true")


def measure(args: argparse.Namespace, experiment: Callable[[PressureModel], T]) -> tuple[PressureModel, T]:
    """The pressure model the arguments describe, and ``experiment`` run on it; a bad value is a
    `SpecError` on ``relief`` (the relief experiments' shared entry)."""
    try:
        model = PressureModel(capacity=args.kv_capacity, clients=args.clients, duration=args.duration)
        return model, experiment(model)
    except RvguardError:
        raise
    except ValueError as exc:
        raise SpecError(str(exc), field="relief") from None


def report_head(name: str, model: PressureModel, conditions: list[dict[str, Any]], *, as_json: bool) -> bool:
    """Print the whole report as JSON (True: nothing more to print) or the table's heading (False)."""
    if as_json:
        print(json.dumps({"experiment": name, "conditions": conditions}, indent=2, allow_nan=False))
        return True
    print(
        f"experiment {name} ({model.clients} surplus clients, KV {model.capacity} tokens, "
        f"{model.duration:g} s)"
    )
    return False


def run(args: argparse.Namespace) -> bool:
    """Run both policies; print the table (or JSON). A measurement: always True."""
    model, results = measure(args, lambda m: relief_livelock(DEFAULT_CONTRACT, m, hold_bound=args.hold_bound))
    conditions = [_condition(p, r, v) for p, (r, v) in results.items()]
    if report_head(NAME, model, conditions, as_json=args.json):
        return True
    for c in conditions:
        print(
            f"  policy={c['params']['policy']:<12} surplus completed {c['surplus_completed']:>4} "
            f"(sustainable {c['sustainable']:.1f}, ceiling {c['ceiling']:.1f})  "
            f"preempted {c['preempted']:>4}  "
            f"answered at the hold bound {c['hold_bound_answers']:>3}  "
            f"longest held {c['max_held_seconds']:.2f} s  "
            f"{'/'.join(JUDGED)} violations {c['violations']}"
        )
    return True


class Command:
    """The plugin object `rvguard.cli.registry` loads."""

    add_arguments = staticmethod(add_arguments)
    run = staticmethod(run)
