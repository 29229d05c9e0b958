"""The voluntary eviction channel in the Guard: on every headroom poll, a running surplus request
whose expected remaining cost of keeping exceeds the cost of moving it is evicted (``evict`` reason
``voluntary``, then preempted with the retry signal), within the planner's k and link bucket,
never a protected request; off unless the contract's ``eviction.voluntary`` block states it.

The crossover is re-derived from the trace by `check_voluntary` (it reads the arrivals' tokens and
the evictions' states, never the channel or the planner); EV, PR and WF are judged by the monitors
online and offline and by the independent brute forces of the emergency and preemption tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rvguard.clock import ManualClock
from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.enforce.dispatchers import MockDispatcher
from rvguard.enforce.eviction import CrossoverCost, EvictionConfig, VoluntaryConfig, voluntary_config
from rvguard.enforce.guard import Guard, MonitorSink
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.redline import HeadroomSample, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, SpecError
from rvguard.events import Admit, Arrive, Event, Evict
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline
from rvguard.runbook_spec import EvictionSpec, VoluntarySpec

from ._harness import check_wf, make_contract, terminal_counts
from .test_emergency import check_ev
from .test_emergency_property import OPS
from .test_preemption import check_pr
from .test_pressure import Engine, _until

REDLINE = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)
PROPS = ("WF", "PR", "EV")
PRICES = VoluntarySpec(opportunity_rate=1.0, fixed=5.0, per_token=0.01, token_seconds=0.1)


def _contract(k: int = 1, prices: VoluntarySpec | None = PRICES, output_cap: int = 100) -> Contract:
    spec = EvictionSpec(k=k, capacity=1000, target=0.3, voluntary=prices)
    return make_contract(slots=4, floor=1, output_cap=output_cap).model_copy(update={"eviction": spec})


class Gauge:
    """A headroom source: ``value`` stamped ``t`` (``None``: no sample yet)."""

    def __init__(self) -> None:
        self.value: float | None = None
        self.t = 0.0

    async def read(self) -> list[HeadroomSample]:
        return [] if self.value is None else [HeadroomSample("kv_cache", self.value, self.t)]


def check_voluntary(trace: Sequence[Event], contract: Contract, prices: VoluntarySpec) -> list[str]:
    """Each ``voluntary`` eviction by brute force: of a request admitted surplus (or demoted), and
    the crossover held: (tokens allowed − generated) · token_seconds · opportunity_rate > fixed +
    per_token · state, with generated = state − prompt tokens and allowed = min(max_tokens, cap)."""
    bad, arrive, basis = [], {}, {}
    for ev in trace:
        if isinstance(ev, Arrive):
            arrive[ev.rid] = ev
        elif isinstance(ev, Admit):
            basis[ev.rid] = ev.basis.value
        elif isinstance(ev, Evict) and ev.reason == "voluntary":
            a = arrive[ev.rid]
            allowed = contract.output_cap if a.max_tokens is None else min(a.max_tokens, contract.output_cap)
            remaining = max(0, allowed - (ev.state - (a.prompt_tokens or 0))) * prices.token_seconds
            if not remaining * prices.opportunity_rate > prices.fixed + prices.per_token * ev.state:
                bad.append(f"{ev.rid}: evicted though keeping it costs no more than moving it")
            if basis.get(ev.rid) not in ("surplus", "demoted"):
                bad.append(f"{ev.rid}: a {basis.get(ev.rid)} request evicted voluntarily")
    return bad


def _judged(trace: list[Event], contract: Contract) -> None:
    requests = [e for e in trace if e.rid]
    assert check_ev(requests, contract.eviction.k) == []  # type: ignore[union-attr]
    assert check_pr(requests) == [] and check_wf(requests) == []
    assert all(n == 1 for n in terminal_counts(requests).values())
    assert check_voluntary(trace, contract, contract.eviction.voluntary) == []  # type: ignore[union-attr,arg-type]
    offline = check_offline(ColumnarTrace.from_events(trace), contract, ("WF", "PR", "EV"))
    assert offline.violations == []


def _guard(
    contract: Contract,
    engine: Engine,
    gauge: Gauge,
    trace: list[Event],
    clock: ManualClock,
    violations: list[object] | None = None,
) -> Guard:
    monitor = Monitor(contract, ("WF", "PR", "EV"))
    found = violations if violations is not None else []
    return Guard(
        contract,
        MockDispatcher(engine.serve),
        sinks=[trace.append, MonitorSink(monitor, on_violation=found.append)],
        clock=clock,
        headroom=gauge,
        config=GuardConfig(
            redline=REDLINE,
            headroom_interval=1e6,  # polled by the test (after the start's first read)
            retry_after=3.0,
        ),
    )


async def test_it_evicts_what_costs_more_to_keep_within_k_and_never_protected_work() -> None:
    contract, engine, gauge, trace, clock = _contract(k=1), Engine(), Gauge(), [], ManualClock()
    violations: list[object] = []
    async with _guard(contract, engine, gauge, trace, clock, violations) as guard:
        loop = guard.headroom
        assert loop is not None and loop.emergency is not None and loop.voluntary is not None
        subs = {  # expected remaining: 100 tokens · 0.1 s = 10 s (cost 10) unless capped lower
            rid: asyncio.ensure_future(guard.submit(Request(rid, tenant, 0.0, prompt_tokens=p, max_tokens=m)))
            for rid, tenant, p, m in (
                ("a", "assured", 900, 100),  # protected (floor-entitled): never, whatever it costs
                ("x", "opp", 50, 100),  # 10 > 5 + 0.01·50: goes
                ("y", "opp", 20, 100),  # 10 > 5.2: would go too, but k = 1 and x (rid order) first
                ("z", "opp", 10, 30),  # 3 s: 3 < 5.1, kept
            )
        }
        await _until(lambda: len(guard.running()) == 4, "all running")
        await loop.poll()  # no sample yet: no resource to land a relief on, nothing goes
        assert loop.voluntary.evicted == 0
        gauge.value, gauge.t = 0.9, clock.now()  # a healthy node: the emergency channel sleeps
        await loop.poll()
        out = await asyncio.wait_for(subs["x"], 5.0)
        assert (out.status, out.reason, out.retry_after) == ("preempted", "preempted", 3.0)
        await loop.poll()  # the same sample again: x's relief is still credited, k = 1 is full
        assert [(e.rid, e.reason) for e in trace if isinstance(e, Evict)] == [("x", "voluntary")]
        loop.emergency.progress("y", 60)  # y has 40 tokens left: 4 s < 5.8, no longer worth moving
        clock.advance(1.0)
        gauge.t = clock.now()  # a fresh sample: x has landed, k is free again
        await loop.poll()
        assert loop.emergency.planner.in_flight == () and loop.voluntary.evicted == 1
        for rid in ("a", "y", "z"):
            engine.done(rid)
        for rid in ("a", "y", "z"):
            assert (await subs[rid]).status == "completed"
    [x] = [e for e in trace if isinstance(e, Evict)]
    assert (x.rid, x.state, x.reason, x.resource, x.headroom) == ("x", 50, "voluntary", "kv_cache", 0.9)
    assert (x.target, x.capacity) == (0.3, 1000)
    assert loop.emergency.evicted == 1 and violations == []
    _judged(trace, contract)


async def test_off_without_the_contracts_voluntary_block() -> None:
    contract, engine, gauge, trace, clock = _contract(prices=None), Engine(), Gauge(), [], ManualClock()
    async with _guard(contract, engine, gauge, trace, clock) as guard:
        assert guard.headroom is not None and guard.headroom.voluntary is None
        o = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0, prompt_tokens=50, max_tokens=100)))
        await _until(lambda: guard.running() == ["o"], "o running")
        gauge.value = 0.9
        await guard.headroom.poll()
        engine.done("o")
        assert (await o).status == "completed"
    assert not [e for e in trace if isinstance(e, Evict)]


def test_the_block_and_its_validation() -> None:
    assert voluntary_config(EvictionSpec(k=1, capacity=10, target=0.5, voluntary=PRICES)) == VoluntaryConfig(
        CrossoverCost(1.0, 5.0, 0.01), 0.1
    )
    assert (
        voluntary_config(EvictionSpec(k=1, capacity=10, target=0.5)) is None
        and voluntary_config(None) is None
    )
    with pytest.raises(ValidationError, match="the voluntary channel needs capacity and target"):
        EvictionSpec(k=1, voluntary=PRICES)
    with pytest.raises(ValidationError, match="token_seconds"):
        VoluntarySpec(opportunity_rate=1.0, token_seconds=0.0)
    with pytest.raises(SpecError, match=r"voluntary\.opportunity_rate") as info:
        VoluntaryConfig(CrossoverCost(0.0, 1.0), 0.1)
    assert info.value.field == "eviction.voluntary.opportunity_rate"
    assert VoluntaryConfig(CrossoverCost(1.0, 1.0), 0.5).expected_remaining(-3) == 0.0


def test_the_voluntary_channel_needs_the_emergency_channel() -> None:
    contract = make_contract()
    guard = Guard(
        contract, MockDispatcher(Engine().serve), headroom=Gauge(), config=GuardConfig(redline=REDLINE)
    )
    assert guard.headroom is not None and guard.headroom.emergency is None
    with pytest.raises(EnforcementError, match="shares the emergency channel's planner"):
        guard.headroom.voluntary_with(VoluntaryConfig(CrossoverCost(1.0, 1.0), 0.1))


async def _run(ops: list[tuple[object, ...]], k: int, prices: VoluntarySpec, cap: int) -> list[Event]:
    contract = _contract(k=k, prices=prices, output_cap=cap)
    engine, clock, gauge, trace = Engine(), ManualClock(), Gauge(), []
    violations: list[object] = []
    guard = Guard(
        contract,
        MockDispatcher(engine.serve),
        sinks=[
            trace.append,
            MonitorSink(Monitor(contract, ("WF", "PR", "EV")), on_violation=violations.append),
        ],
        clock=clock,
        headroom=gauge,
        config=GuardConfig(
            redline=REDLINE,
            headroom_interval=1e6,
            eviction=EvictionConfig(
                k=k, capacity=1000, target=0.3, overhead=0.5, link_rate=400.0, link_burst=120
            ),
            drain=False,
        ),
    )
    tasks: list[asyncio.Future[object]] = []
    async with guard:
        loop = guard.headroom
        assert loop is not None and loop.emergency is not None and loop.voluntary is not None
        for n, op in enumerate(ops):
            kind, a, b = op[0], op[1], op[-1]
            running = guard.running()
            if kind == "arrive":
                req = Request(f"r{n}", str(a), clock.now(), prompt_tokens=int(b))  # type: ignore[call-overload]
                tasks.append(asyncio.ensure_future(guard.submit(req)))
            elif kind == "finish" and running:
                engine.done(running[int(a) % len(running)])  # type: ignore[call-overload]
            elif kind == "progress" and running:
                loop.emergency.progress(running[int(a) % len(running)], int(b))  # type: ignore[call-overload]
            elif kind == "sample":
                clock.advance(float(op[2]))  # type: ignore[arg-type]
                gauge.value, gauge.t = float(a), clock.now() + float(b)  # type: ignore[arg-type]
                await loop.poll()
                assert len(loop.emergency.planner.in_flight) <= k
            for _ in range(4):
                await asyncio.sleep(0)
        for _ in range(10):
            for rid in [*engine.release, *guard.running()]:
                engine.done(rid)
            await asyncio.sleep(0)
    await asyncio.gather(*tasks, return_exceptions=True)
    assert violations == []
    return trace


PRICE_GRID = st.builds(
    VoluntarySpec,
    opportunity_rate=st.sampled_from([0.5, 1.0, 4.0]),
    fixed=st.sampled_from([0.0, 1.0, 5.0]),
    per_token=st.sampled_from([0.0, 0.01, 0.1]),
    token_seconds=st.sampled_from([0.01, 0.1]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(1, 3), PRICE_GRID, st.sampled_from([16, 48, 100]))
def test_the_guards_trace_with_both_channels_keeps_ev_pr_wf_and_the_crossover(
    ops: list[tuple[object, ...]], k: int, prices: VoluntarySpec, cap: int
) -> None:
    trace = asyncio.run(_run(ops, k, prices, cap))
    _judged(trace, _contract(k=k, prices=prices, output_cap=cap))
