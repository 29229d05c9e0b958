"""Property (issue 24): for every eviction and preemption the Guard carries out — bare preemption,
rationed relief, the emergency and the voluntary eviction channels — the trace its sinks receive
and the decision core's own record agree, after every step.

The oracle replays the sinks' trace with its own table of moves (DESIGN §2 and §10 written out
below, not read from `rvguard.lifecycle` or the core's transitions) and its own counts: each
request's stage, and the counters the core keeps (arrivals, admissions by basis, rejects,
dispatches, ends by kind, demotions, restores, evictions, requests running, queued and held).
Hypothesis draws the arrivals (tenant, prompt size, the learner's admit bit and hint), the
headroom signal (glitches to 0 included, samples stale or ahead), progress reports and
completions. After every step every request the core still holds is in the stage the trace put
it in, every other request has ended in the trace, and the counters are equal. A Guard that
wrote an ``evict`` the core never applied (the trace: running → evicted; the core: running), or a
core move no sink saw, fails here at that step.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.clock import ManualClock
from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import MockDispatcher
from rvguard.enforce.eviction import EvictionConfig
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.learners import LoadView
from rvguard.enforce.rationing import ReliefConfig
from rvguard.enforce.redline import HeadroomSample, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.events import Admit, Event, Evict, Proposal
from rvguard.runbook_spec import EvictionSpec, VoluntarySpec

from ._harness import make_contract
from .test_pressure import Engine

#: DESIGN §2 and §10: (stage, kind) -> next stage, for the moves one guard's trace may take
MOVES: dict[tuple[str, str], str] = {
    ("new", "arrive"): "arrived",
    ("arrived", "admit"): "admitted",
    ("arrived", "reject"): "done",
    ("admitted", "dispatch"): "dispatched",
    ("admitted", "drop"): "done",
    ("admitted", "fail"): "done",
    ("admitted", "demote"): "held",
    ("held", "restore"): "admitted",
    ("held", "drop"): "done",
    ("held", "fail"): "done",
    ("dispatched", "complete"): "done",
    ("dispatched", "fail"): "done",
    ("dispatched", "evict"): "evicted",
    ("evicted", "fail"): "done",
}
#: the core's counters, each as the trace counts it: events of a kind (and an admission's basis)
COUNTED = {
    "arrived": "arrive",
    "rejected": "reject",
    "dispatched": "dispatch",
    "completed": "complete",
    "dropped": "drop",
    "failed": "fail",
    "demoted": "demote",
    "restored": "restore",
    "evicted": "evict",
}
CAPACITY = 100
REDLINE = RedlineConfig(
    (ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0, horizon=1.0
)
MODES = ("bare", "rationed", "emergency", "voluntary")


def replay(trace: Sequence[Event]) -> tuple[dict[str, str], dict[str, int]]:
    """Each request's stage and the core's counters, from the trace alone (an illegal move fails)."""
    stage: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for ev in trace:
        if not ev.rid:
            continue  # a node record (sample, alert, stall): no request moves
        kind = ev.kind.value
        here = stage.get(ev.rid, "new")
        assert (here, kind) in MOVES, f"{ev.rid}: {kind} in stage {here}"
        stage[ev.rid] = MOVES[here, kind]
        counts[kind] += 1
        if isinstance(ev, Admit):
            counts[f"admitted_{ev.basis.value}"] += 1
    record = {name: counts[kind] for name, kind in COUNTED.items()}
    record |= {f"admitted_{b}": counts[f"admitted_{b}"] for b in ("floor", "surplus", "demoted")}
    at = Counter(stage.values())
    record |= {
        "in_flight": at["dispatched"] + at["evicted"],
        "queue_depth": at["admitted"],
        "held": at["held"],
    }
    return stage, record


def agree(core: DecisionCore, trace: Sequence[Event]) -> None:
    """The core's record (its live requests' stages, its counters) is the trace's (module doc)."""
    stage, record = replay(trace)
    stats = core.statistics()
    assert {name: getattr(stats, name) for name in record} == record
    for rid, where in stage.items():
        if where == "done":
            assert not core.is_live(rid), f"{rid}: ended in the trace, live in the core"
        else:
            assert core.is_live(rid), f"{rid}: {where} in the trace, unknown to the core"
            assert core._live[rid].state.value == where, f"{rid}: {where} in the trace"


class Script:
    """A headroom source answering what the test last set (value and its own timestamp)."""

    def __init__(self) -> None:
        self.value, self.t = 1.0, 0.0

    async def read(self) -> list[HeadroomSample]:
        return [HeadroomSample("kv_cache", self.value, self.t)]


class Scripted:
    """A synchronous learner proposing what hypothesis drew for each request (asked inline)."""

    def __init__(self) -> None:
        self.proposals: dict[str, Proposal] = {}

    def propose(self, request: Request, view: LoadView) -> Proposal:
        return self.proposals[request.rid]


def _contract(mode: str) -> Contract:
    base = make_contract(slots=4, floor=2, excess="demote", output_cap=100)
    if mode not in ("emergency", "voluntary"):
        return base
    prices = VoluntarySpec(opportunity_rate=1.0, fixed=5.0, per_token=0.01, token_seconds=0.1)
    spec = EvictionSpec(k=2, capacity=CAPACITY, target=0.3, voluntary=prices if mode == "voluntary" else None)
    return base.model_copy(update={"eviction": spec})


def _guard(
    mode: str, engine: Engine, source: Script, clock: ManualClock, trace: list[Event], learner: Scripted
) -> Guard:
    eviction = (
        EvictionConfig(k=2, capacity=CAPACITY, target=0.3, overhead=0.5, link_rate=200.0, link_burst=80)
        if mode == "emergency"
        else None
    )
    guard = Guard(
        _contract(mode),
        MockDispatcher(engine.serve),
        learner=learner,
        sinks=[trace.append],
        clock=clock,
        headroom=source,
        config=GuardConfig(
            learner_timeout=None,  # asked inline: the run is deterministic
            redline=REDLINE,
            headroom_interval=1e6,  # polled by the test only (after the start's first read)
            eviction=eviction,
            drain=False,
        ),
    )
    assert guard.headroom is not None
    if mode == "rationed":
        guard.headroom.ration_with(ReliefConfig(CAPACITY, hold_bound=2.0))
    return guard


_ARRIVE = st.tuples(
    st.just("arrive"),
    st.sampled_from(["assured", "opp", "opp", "opp"]),
    st.integers(0, 60),
    st.booleans(),
    st.none() | st.sampled_from([-1.0, 0.0, 2.0]),
)
_SAMPLE = st.tuples(
    st.just("sample"),
    st.sampled_from([0.0, 0.0, 0.01, 0.04, 0.1, 0.3, 0.6, 1.0]),
    st.sampled_from([0.0, 0.2, 1.0, 2.5]),
    st.sampled_from([0.0, 0.0, -0.5, 0.1]),
)
_FINISH = st.tuples(st.just("finish"), st.integers(0, 30))
_PROGRESS = st.tuples(st.just("progress"), st.integers(0, 30), st.integers(0, 90))
#: rounds of arrivals, progress reports, one sample and completions, flattened to one list of ops
OPS = st.lists(
    st.tuples(
        st.lists(_ARRIVE, max_size=4), st.lists(_PROGRESS, max_size=3), _SAMPLE, st.lists(_FINISH, max_size=2)
    ),
    min_size=2,
    max_size=8,
).map(lambda rounds: [op for a, p, s, f in rounds for op in (*a, *p, s, *f)])


async def _settle() -> None:
    for _ in range(4):
        await asyncio.sleep(0)


class Run:
    """One Guard under test: its engine, headroom source, clock, learner, trace and callers."""

    def __init__(self, mode: str) -> None:
        self.engine, self.source, self.clock = Engine(), Script(), ManualClock()
        self.trace: list[Event] = []
        self.learner = Scripted()
        self.guard = _guard(mode, self.engine, self.source, self.clock, self.trace, self.learner)
        self.calls: list[asyncio.Future[object]] = []


async def _step(run: Run, n: int, op: tuple) -> None:  # type: ignore[type-arg]
    guard, engine, source, clock = run.guard, run.engine, run.source, run.clock
    loop = guard.headroom
    assert loop is not None
    running = guard.running()
    if op[0] == "arrive":
        _, tenant, prompt, admit, hint = op
        run.learner.proposals[f"r{n}"] = Proposal(admit=admit, priority_hint=hint)
        request = Request(f"r{n}", tenant, clock.now(), prompt_tokens=prompt)
        run.calls.append(asyncio.ensure_future(guard.submit(request)))
    elif op[0] == "finish" and running:
        engine.done(running[op[1] % len(running)])
    elif op[0] == "progress" and running:
        loop.progress(running[op[1] % len(running)], op[2])
    elif op[0] == "sample":
        _, value, dt, offset = op
        clock.advance(dt)
        source.value, source.t = value, clock.now() + offset
        await loop.poll()


async def _run(mode: str, ops: list[tuple]) -> tuple[list[Event], int]:  # type: ignore[type-arg]
    run = Run(mode)
    guard, engine, trace = run.guard, run.engine, run.trace
    relief = 0
    async with guard:
        for n, op in enumerate(ops):
            await _step(run, n, op)
            agree(guard.core, trace)  # at once: the events of one step reach the sinks as applied
            await _settle()
            agree(guard.core, trace)
        relief = sum(e.kind.value == "evict" or getattr(e, "reason", "") == "preempted" for e in trace)
        for _ in range(10):
            for rid in guard.running():
                engine.done(rid)
            await _settle()
    await asyncio.gather(*run.calls, return_exceptions=True)
    agree(guard.core, trace)  # the shutdown ended the rest: nothing live, every count equal
    assert not [rid for rid, s in replay(trace)[0].items() if s != "done"]
    return trace, relief


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MODES), OPS)
def test_the_trace_and_the_cores_record_agree_through_relief(mode: str, ops: list[tuple]) -> None:  # type: ignore[type-arg]
    asyncio.run(_run(mode, ops))


def test_every_mode_relieves_on_a_crossing() -> None:
    """The property above is not vacuous: in each mode, running surplus past the hard floor is
    preempted or evicted, and the core's record follows (evict counted, the ends counted)."""
    ops: list[tuple] = [("arrive", "opp", 40, True, None) for _ in range(4)]  # type: ignore[type-arg]
    ops += [("progress", i, 30) for i in range(4)] + [("sample", 0.0, 1.0, 0.0), ("sample", 0.0, 1.0, 0.0)]
    for mode in MODES:
        trace, relief = asyncio.run(_run(mode, ops))
        assert relief >= 1, mode
        assert any(e.kind.value == "evict" for e in trace) == (mode in ("emergency", "voluntary")), mode


def test_the_oracle_catches_an_evict_the_core_never_applied() -> None:
    """The old Guard wrote ``evict`` to its sinks beside the core: the oracle tells."""
    core = DecisionCore(make_contract(slots=2))
    trace = core.arrive(Request("o", "opp", 0.0), Proposal(), 0.0)
    agree(core, trace)
    trace.append(Evict(1.0, "o", 10, "emergency"))  # written to the trace only
    with pytest.raises(AssertionError, match="evicted"):
        agree(core, trace)
