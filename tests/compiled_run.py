"""A seeded workload through the hot paths, printed as JSON: run once pure, once compiled, compare.

Used by tests/test_compiled.py in a subprocess (``python tests/compiled_run.py``, with the tree to
test first on ``sys.path`` and ``RVGUARD_PURE`` set or not). It prints which rvguard modules were
loaded compiled, then for each case the whole simulator trace (the decision core's events), the
online monitor's violations and metrics, and the verdicts on a perturbed copy of the trace (events
dropped and repeated: WF breaks, missed deadlines), the core's under a firing redline, and the
Guard's (its asyncio edge) over a seeded dispatcher that yields and fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import sys
from typing import Any

from rvguard._compiled import compiled_modules
from rvguard.contract import contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import CallableDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.learners import RandomLearner
from rvguard.enforce.redline import HeadroomSample, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.events import Event, Proposal, event_to_dict
from rvguard.monitors import Monitor
from rvguard.sim.backend import BackendModel
from rvguard.sim.run import run_once
from rvguard.sim.workloads import bursty

CONTRACT = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 4,
        "service": {"s_max": 0.66, "lower": 0.05},
        "tenants": {
            "assured": {"floor": 6, "deadline": 1.82, "tier": 0},
            "opp": {"deadline": 1.82, "tier": 1},
        },
    }
)
PROPERTIES = ("AF", "SF", "DR", "WF", "RB")


def _verdicts(mon: Monitor) -> list[Any]:
    return [(v.property, v.rid, v.t, v.detail, len(v.witness)) for v in mon.violations()]


def _judged(events: list[Event]) -> dict[str, Any]:
    mon = Monitor(CONTRACT, PROPERTIES, retain_finished=None)
    mon.feed_all(events)
    return {"violations": _verdicts(mon), "metrics": dataclasses.asdict(mon.summary())}


def _perturbed(events: list[Event], rng: random.Random) -> list[Event]:
    """Drop some events and repeat others (times stay ordered): WF breaks, late or missing ends."""
    out: list[Event] = []
    for ev in events:
        u = rng.random()
        if u < 0.03:
            continue
        out.append(ev)
        if u > 0.98:
            out.append(ev)
    return out


def sim_case(seed: int, mode: str, learner: str, deferred_drop: bool) -> dict[str, Any]:
    """One simulated run over the real core: its trace and its verdicts, and a perturbed copy's."""
    rng = random.Random(seed)
    arrivals = bursty(CONTRACT, rng, assured_rate=5.0, opp_rate=9.0, duration=60.0, cv=2.0)
    run = run_once(
        CONTRACT,
        arrivals,
        mode=mode,
        learner=learner,
        seed=seed,
        model=BackendModel(),
        deferred_drop=deferred_drop,
    )
    events = list(run.result.events)
    return {
        "trace": [event_to_dict(e) for e in events],
        "violations": [(v.property, v.rid, v.t, v.detail) for v in run.violations],
        "metrics": dataclasses.asdict(run.metrics),
        "perturbed": _judged(_perturbed(events, random.Random(seed + 1))),
    }


def redline_case(seed: int) -> list[dict[str, Any]]:
    """The core with a redline that fires and clears: arrivals, samples and completions, its events."""
    kv = ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05)
    core = DecisionCore(CONTRACT, redline=RedlineConfig((kv,), alpha=0.5))
    rng = random.Random(seed)
    out: list[Event] = []
    running: list[str] = []
    now = 0.0
    for i in range(400):
        now += rng.expovariate(20.0)
        u = rng.random()
        if u < 0.15:
            out += core.observe(HeadroomSample("kv_cache", rng.choice((0.05, 0.15, 0.5, 0.9)), now), now)
        elif u < 0.45 and running:
            out += core.finish(running.pop(rng.randrange(len(running))), now)
        else:
            tenant = "assured" if rng.random() < 0.3 else "opp"
            out += core.arrive(Request(f"r{i}", tenant, now), Proposal(priority_hint=rng.random()), now)
        running = [e.rid for e in out if e.kind.value == "dispatch" and core.running_basis(e.rid) is not None]
    return [event_to_dict(e) for e in out]


class _Ticks:
    """A clock that moves 5 ms at each reading: the Guard's events in both builds read it alike."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 0.005
        return self.t


def guard_case(seed: int) -> list[dict[str, Any]]:
    """A Guard over 300 submissions from tasks started together; its dispatcher yields a seeded
    number of loop turns and sometimes fails. Nothing waits on real time (no time-out, the learner
    asked inline, no stall watchdog), so the loop's order, and so the trace, is the same in both."""
    rng = random.Random(seed)
    plan = [(rng.randrange(4), rng.random()) for _ in range(300)]

    async def backend(request: Request) -> Response:
        turns, u = plan[int(request.rid[1:])]
        for _ in range(turns):
            await asyncio.sleep(0)
        if u < 0.05:
            raise RuntimeError("seeded failure")
        return Response(output_tokens=turns)

    async def later(guard: Guard, i: int) -> None:
        for _ in range(i // 8):  # arrivals spread over the loop's turns, so over several windows
            await asyncio.sleep(0)
        await guard.submit(Request(f"r{i}", "assured" if i % 3 == 0 else "opp", 0.0))

    async def run() -> list[Event]:
        events: list[Event] = []
        learner = RandomLearner(random.Random(seed + 7))
        config = GuardConfig(learner_timeout=None, stall_threshold=None)
        guard = Guard(CONTRACT, CallableDispatcher(backend), learner=learner, sinks=[events.append],
                      clock=_Ticks(), config=config)  # fmt: skip
        async with guard:
            await asyncio.gather(*(later(guard, i) for i in range(300)))
        return events

    return [event_to_dict(e) for e in asyncio.run(run())]


def main() -> None:
    """Print the compiled modules and every case's results as one JSON document."""
    cases = {
        f"{seed}-{mode}-{learner}-{drop}": sim_case(seed, mode, learner, drop)
        for seed in (0, 1)
        for mode, learner, drop in (
            ("guarded", "admit-all", False),
            ("guarded", "random", True),
            ("gated-fifo", "random", False),
        )
    }
    redline = {str(seed): redline_case(seed) for seed in (0, 1, 2)}
    guard = {str(seed): guard_case(seed) for seed in (0, 1)}
    out = {"compiled": compiled_modules(), "sim": cases, "redline": redline, "guard": guard}
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
