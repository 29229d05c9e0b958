"""With a user's table enforced, the Guard's trace never breaks that table, nor AF, DR, WF: for any
arrivals (tenants, gaps, sizes), any learner (its admits and hints) and any order of the backend's
answers. The table is one of the three examples or the test's dispatch table (remedy delay).
The one exception is the built-in's: a floor admission (or dispatch) the table would refuse goes
out, and a ``shield`` alert record at that instant says so."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.clock import ManualClock
from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.learners import LoadView
from rvguard.enforce.request import Request
from rvguard.events import Admit, Basis, Event, Proposal
from rvguard.monitors import Monitor
from rvguard.properties import PropertyTable, TableMonitor
from rvguard.properties.load import load_properties
from rvguard.watch_events import Watch

EX = Path(__file__).resolve().parents[2] / "examples" / "properties"
TABLES: list[PropertyTable] = [
    *(t for p in sorted(EX.glob("*.yaml")) for t in load_properties(p)),
    *load_properties(Path(__file__).with_name("running_limit.yaml")),
]
CONTRACT: Contract = contract_from_mapping(
    {
        "epoch": 0.0,
        "window": 1.0,
        "slots": 3,
        "output_cap": 1024,
        "service": {"s_max": 5.0, "lower": 0.05},
        "tenants": {
            "acme": {"floor": 0, "deadline": 10.0, "tier": 1},
            "beta": {"floor": 0, "deadline": 10.0, "tier": 1},
            "assured": {"floor": 1, "deadline": 0.8, "tier": 0},
        },
    }
)

ARRIVAL = st.tuples(
    st.sampled_from(["acme", "beta", "assured"]),
    st.sampled_from([0.0, 0.05, 0.3, 0.7]),  # the gap before it
    st.sampled_from([0, 500, 3000]),  # prompt tokens
    st.sampled_from([16, 1024]),  # max tokens
    st.booleans(),  # the learner admits it
    st.one_of(st.none(), st.floats(-5, 5)),  # the learner's hint
)


class Scripted:
    """The untrusted learner: the drawn answer per rid."""

    def __init__(self, answers: dict[str, Proposal]) -> None:
        self.answers = answers

    def propose(self, request: Request, view: LoadView) -> Proposal:
        return self.answers[request.rid]


async def _run(table: PropertyTable, arrivals: list[tuple], order: list[int], drop: bool) -> list[Event]:
    """Submit the arrivals at their times; the backend answers in ``order`` (each answer 0.1 s on)."""
    clock, trace = ManualClock(), []
    gates = {f"r{i}": asyncio.Event() for i in range(len(arrivals))}

    async def backend(request: Request) -> Response:
        await gates[request.rid].wait()
        return Response()

    answers = {f"r{i}": Proposal(admit=a[4], priority_hint=a[5]) for i, a in enumerate(arrivals)}
    guard = Guard(
        CONTRACT,
        MockDispatcher(backend),
        learner=Scripted(answers),
        sinks=[trace.append],
        clock=clock,
        config=GuardConfig(learner_timeout=None, deferred_drop=drop, properties=[table], watch=None),
    )
    async with guard:
        tasks = []
        for i, (tenant, gap, prompt, most, _, _) in enumerate(arrivals):
            clock.advance(gap)
            request = Request(f"r{i}", tenant, clock.now(), prompt_tokens=prompt, max_tokens=most)
            tasks.append(asyncio.create_task(guard.submit(request)))
            await asyncio.sleep(0)
        for i in order:
            clock.advance(0.1)
            gates[f"r{i}"].set()
            for _ in range(3):
                await asyncio.sleep(0)
        await asyncio.gather(*tasks)
    return trace


def _floor(trace: list[Event], rid: str) -> bool:
    return any(isinstance(ev, Admit) and ev.rid == rid and ev.basis is Basis.FLOOR for ev in trace)


def _conceded(trace: list[Event]) -> set[tuple[float, str]]:
    """(time, rid) of each ``shield`` alert record saying a built-in guarantee came first."""
    out = set()
    for ev in trace:
        if isinstance(ev, Watch) and ev.condition == "shield" and "comes first" in ev.extra["detail"]:
            out.add((ev.t, re.search(r" of (\S+):", ev.extra["detail"]).group(1)))  # type: ignore[union-attr]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(TABLES),
    st.lists(ARRIVAL, min_size=1, max_size=10).flatmap(
        lambda a: st.tuples(st.just(a), st.permutations(range(len(a))))
    ),
    st.booleans(),
)
def test_the_enforced_trace_keeps_the_table_and_the_builtins(
    table: PropertyTable, drawn: tuple[list[tuple], list[int]], drop: bool
) -> None:
    arrivals, order = drawn
    trace = asyncio.run(_run(table, arrivals, order, drop))
    for v in TableMonitor(CONTRACT, [table]).feed_all(trace):  # only where a built-in came first:
        last = v.witness[-1]
        assert getattr(last, "basis", None) is Basis.FLOOR or _floor(trace, v.rid), v
        assert (v.t, v.rid) in _conceded(trace), v  # ... and the trace says so
    monitor = Monitor(CONTRACT, properties=("AF", "DR", "WF"))
    found = monitor.feed_all(trace)
    assert found == [], found
    ends = [ev.rid for ev in trace if ev.kind.value in ("reject", "complete", "drop", "fail")]
    assert sorted(ends) == sorted(f"r{i}" for i in range(len(arrivals)))  # every request ended once
