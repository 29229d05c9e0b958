"""Property: for any arrivals, any progress reports and any headroom signal (noisy, stale,
duplicated, jittered sample times), the Guard's trace with the emergency channel never violates
EV, PR, AF, DR or WF.

AF, DR, WF, PR and EV are judged by the online monitors; AF, DR and WF also by the harness's
brute-force checks, PR by `check_pr`, and EV, with the credited-headroom rule the trace-only
monitor judges on what each ``evict`` records, also by an independent brute force
(`check_ev_credited`: it re-derives the smoothed headroom from the trace's samples, checks the
recorded headroom is that, and never imports the channel, the planner or the monitor): at most k
evictions in flight (from ``evict`` until a fresh sample taken after it), none issued while the
credited headroom already reaches the target, none of a request admitted on the floor. The
online EV (a sink during the run) and the offline checker over the finished trace find nothing,
with the target and capacity the contract's or only the records'."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.clock import ManualClock
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.enforce.dispatchers import MockDispatcher
from rvguard.enforce.eviction import EvictionConfig
from rvguard.enforce.guard import Guard, MonitorSink
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.redline import HeadroomSample, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.events import Admit, Event, Evict, Sample
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline
from rvguard.runbook_spec import EvictionSpec

from ._harness import check_af, check_dr, check_wf, make_contract, terminal_counts
from .test_emergency import check_ev
from .test_preemption import check_pr
from .test_pressure import Engine

CAPACITY = 100


class Script:
    """A headroom source answering whatever the test last set (value and its own timestamp)."""

    def __init__(self) -> None:
        self.value, self.t = 1.0, 0.0

    async def read(self) -> list[HeadroomSample]:
        return [HeadroomSample("kv_cache", self.value, self.t)]


def check_ev_credited(trace: Sequence[Event], k: int, alpha: float, target: float) -> list[str]:
    """EV and the credited-headroom rule by brute force over the trace alone (module doc)."""
    bad: list[str] = []
    smoothed: float | None = None
    flight: dict[str, tuple[int, float]] = {}  # rid -> (state, evicted at)
    basis: dict[str, str] = {}
    for ev in trace:
        if isinstance(ev, Sample):
            smoothed = ev.value if smoothed is None else alpha * ev.value + (1 - alpha) * smoothed
            flight = {r: (s, t) for r, (s, t) in flight.items() if not ev.sample_time > t}
        elif isinstance(ev, Admit):
            basis[ev.rid] = ev.basis.value
        elif isinstance(ev, Evict):
            if smoothed is None:
                bad.append(f"{ev.rid}: evicted before any sample")
                continue
            if ev.resource != "kv_cache" or ev.headroom is None or abs(ev.headroom - smoothed) > 1e-12:
                bad.append(f"{ev.rid}: recorded headroom {ev.headroom} on {ev.resource}, Ĥ is {smoothed}")
            if (ev.target, ev.capacity) != (target, CAPACITY):
                bad.append(f"{ev.rid}: recorded target {ev.target}, capacity {ev.capacity}")
            credited = smoothed * CAPACITY + sum(s for s, _ in flight.values())
            if credited >= target * CAPACITY - 1e-9:
                bad.append(f"{ev.rid}: evicted while credited headroom {credited} reached the target")
            if len(flight) >= k:
                bad.append(f"{ev.rid}: evicted with {len(flight)} in flight (k = {k})")
            if basis.get(ev.rid) not in ("surplus", "demoted"):
                bad.append(f"{ev.rid}: a {basis.get(ev.rid)} request evicted")
            flight[ev.rid] = (ev.state, ev.t)
    return bad


_ARRIVE = st.tuples(st.just("arrive"), st.sampled_from(["assured", "opp", "opp"]), st.integers(0, 60))
# headroom value (glitches to 0 and 1 included), clock step, sample-time offset (stale: < 0, ahead: > 0)
_SAMPLE = st.tuples(
    st.just("sample"),
    st.sampled_from([0.0, 0.01, 0.03, 0.04, 0.1, 0.3, 0.6, 1.0]),
    st.sampled_from([0.0, 0.2, 1.0, 1.3]),
    st.sampled_from([0.0, 0.0, -0.5, 0.1]),
)
_FINISH = st.tuples(st.just("finish"), st.integers(0, 30), st.just(0))
_PROGRESS = st.tuples(st.just("progress"), st.integers(0, 30), st.integers(0, 80))
#: rounds of arrivals, progress reports, one sample, completions (flattened to one list of ops)
OPS = st.lists(
    st.tuples(
        st.lists(_ARRIVE, max_size=3), st.lists(_PROGRESS, max_size=2), _SAMPLE, st.lists(_FINISH, max_size=2)
    ),
    min_size=1,
    max_size=10,
).map(lambda rounds: [op for a, p, s, f in rounds for op in (*a, *p, s, *f)])


def _contract(k: int, target: float | None = None) -> Contract:
    """k alone (EV judges the credit rule on each record's target and capacity), or with the
    channel's target and capacity stated (EV judges on the contract's)."""
    spec = EvictionSpec(k=k, capacity=None if target is None else CAPACITY, target=target)
    return make_contract(slots=4, floor=2).model_copy(update={"eviction": spec})


async def _settle() -> None:
    for _ in range(4):
        await asyncio.sleep(0)


async def _run(
    ops: list[tuple[object, ...]], k: int, alpha: float, target: float, stated: bool
) -> list[Event]:
    contract = _contract(k, target if stated else None)
    engine, clock, source, trace = Engine(), ManualClock(), Script(), []
    monitor = Monitor(contract, properties=("AF", "DR", "WF", "PR", "EV"))
    violations: list[object] = []
    redline = RedlineConfig(
        (ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=alpha, horizon=1.0
    )
    config = EvictionConfig(
        k=k, capacity=CAPACITY, target=target, overhead=0.5, link_rate=200.0, link_burst=80
    )
    guard = Guard(
        contract,
        MockDispatcher(engine.serve),
        sinks=[trace.append, MonitorSink(monitor, on_violation=violations.append)],
        clock=clock,
        headroom=source,
        config=GuardConfig(
            redline=redline,
            headroom_interval=1e6,  # polled by the test only (after the start's first read)
            eviction=config,
            drain=False,  # what is still queued (held by the redline) ends ``shutdown`` at exit
        ),
    )
    tasks: list[asyncio.Future[object]] = []
    async with guard:
        loop = guard.headroom
        assert loop is not None and loop.emergency is not None
        for n, op in enumerate(ops):
            kind = op[0]
            if kind == "arrive":
                req = Request(f"r{n}", str(op[1]), clock.now(), prompt_tokens=int(op[2]))  # type: ignore[call-overload]
                tasks.append(asyncio.ensure_future(guard.submit(req)))
            elif kind == "finish":
                running = guard.running()
                if running:
                    engine.done(running[int(op[1]) % len(running)])  # type: ignore[call-overload]
            elif kind == "progress":
                running = guard.running()
                if running:
                    loop.emergency.progress(running[int(op[1]) % len(running)], int(op[2]))  # type: ignore[call-overload]
            elif kind == "sample":
                clock.advance(float(op[2]))  # type: ignore[arg-type]
                source.value, source.t = float(op[1]), clock.now() + float(op[3])  # type: ignore[arg-type]
                await loop.poll()
                assert len(loop.emergency.planner.in_flight) <= k
            await _settle()
        for rid in list(engine.release) + guard.running():
            engine.done(rid)
        for _ in range(10):
            for rid in guard.running():
                engine.done(rid)
            await _settle()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert violations == []
    return trace


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(1, 3), st.sampled_from([1.0, 0.5]), st.sampled_from([0.3, 0.6]), st.booleans())
def test_the_guards_trace_keeps_ev_pr_af_dr_wf(
    ops: list[tuple[object, ...]], k: int, alpha: float, target: float, stated: bool
) -> None:
    trace = asyncio.run(_run(ops, k, alpha, target, stated))
    contract = _contract(k, target if stated else None)
    offline = check_offline(ColumnarTrace.from_events(trace), contract, ("WF", "PR", "EV"))
    assert offline.violations == []  # the monitor online (the sink above) and offline agree: none
    requests = [e for e in trace if e.rid]
    assert check_ev_credited(trace, k, alpha, target) == []
    assert check_ev(requests, k) == []
    assert check_pr(requests) == []
    assert check_wf(requests) == []
    assert check_af(contract, requests) == []
    assert check_dr(contract, requests) == []
    assert all(n == 1 for n in terminal_counts(requests).values())


def _first_violation(events: list[Event], contract: Contract, prop: str) -> tuple[str, float]:
    """The first violation of ``prop``, online; offline must report the same ones."""
    monitor = Monitor(contract, properties=("WF", prop))
    monitor.feed_all(events)
    online = [(v.rid, v.t) for v in monitor.violations()]
    offline = check_offline(ColumnarTrace.from_events(events), contract, ("WF", prop))
    assert [(v.rid, v.t) for v in offline.violations] == online
    assert online
    return online[0]


def _credited_before(trace: list[Event], i: int) -> int:
    """State tokens of the evictions before ``trace[i]`` whose relief no fresh sample has measured yet
    (the design's "credited": an eviction until a sample of its resource taken after it, newer than
    every earlier one), counted here from the trace alone."""
    total = 0
    for j, e in enumerate(trace[:i]):
        if not isinstance(e, Evict) or e.resource is None:
            continue
        newest = max(
            (s.sample_time for s in trace[:j] if isinstance(s, Sample) and s.resource == e.resource),
            default=float("-inf"),
        )
        landed = False
        for s in trace[j + 1 : i]:
            if isinstance(s, Sample) and s.resource == e.resource and s.sample_time > newest:
                landed = landed or s.sample_time > e.t
                newest = s.sample_time
        total += 0 if landed else e.state
    return total


#: three surplus requests running, then the headroom at 0 three times: the channel evicts (alpha 1),
#: so every generated run below has an emergency ``evict`` to mutate (no inputs filtered out)
_EMERGENCY = [("arrive", "opp", 40)] * 3 + [("sample", 0.0, 0.2, 0.0)] * 3


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(2, 3), st.sampled_from([0.3, 0.6]), st.booleans())
def test_ev_reports_each_mutation_of_the_guards_emergency_evictions_at_it(
    ops: list[tuple[object, ...]], k: int, target: float, stated: bool
) -> None:
    """Mutations of a compliant Guard trace, each at one emergency ``evict``: (1) its recorded headroom
    and resource removed (nothing left to judge its trigger on); (2) its headroom moved to the exact
    decimal tie, where the credited headroom (it plus the evictions not landed) equals the target.
    EV reports each at that event, online and offline."""
    from fractions import Fraction

    from hypothesis import event

    trace = asyncio.run(_run([*_EMERGENCY, *ops], k, 1.0, target, stated))
    contract = _contract(k, target if stated else None)
    emergencies = [i for i, e in enumerate(trace) if isinstance(e, Evict) and e.reason == "emergency"]
    assert emergencies, "the prefix drives the channel to evict"
    i = emergencies[-1]
    e = trace[i]
    assert isinstance(e, Evict)
    bare = Evict(e.t, e.rid, e.state, e.reason)
    assert _first_violation([*trace[:i], bare, *trace[i + 1 :]], contract, "EV") == (e.rid, e.t)
    tie = Fraction(repr(target)) - Fraction(_credited_before(trace, i), CAPACITY)
    event(f"tie mutation applies: {tie >= 0}")
    if tie >= 0:
        mutated = Evict(e.t, e.rid, e.state, e.reason, e.resource, float(tie), e.target, e.capacity)
        assert _first_violation([*trace[:i], mutated, *trace[i + 1 :]], contract, "EV") == (e.rid, e.t)
