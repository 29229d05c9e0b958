"""Bare preemption: the pure notice/stop rule over the core, and the Guard stopping a dispatch.

PR is checked by an independent brute-force reading of the trace (`check_pr`):
a ``fail`` with reason ``preempted`` only for a request admitted on basis
surplus or demoted, and exactly one terminal event per request.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.clock import ManualClock
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.preemption import PREEMPTED, Preemption
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, SpecError
from rvguard.events import Admit, Arrive, Dispatch, Event, Fail, Proposal

from ._harness import by_rid, check_af, check_dr, check_wf, make_contract, terminal_counts


def check_pr(trace: Sequence[Event]) -> list[str]:
    """PR by brute force: preempted only if admitted surplus/demoted and running; one terminal each."""
    bad = []
    for rid, evs in by_rid(trace).items():
        for i, ev in enumerate(evs):
            if isinstance(ev, Fail) and ev.reason == PREEMPTED:
                admits = [e for e in evs[:i] if isinstance(e, Admit)]
                if not admits or admits[0].basis.value not in ("surplus", "demoted"):
                    bad.append(f"{rid}: preempted, admitted as {admits}")
                if not any(isinstance(e, Dispatch) for e in evs[:i]):
                    bad.append(f"{rid}: preempted before it ran")
    bad += [f"{rid}: {n} terminal events" for rid, n in terminal_counts(trace).items() if n != 1]
    return bad


# -- the pure rule --------------------------------------------------------------------
def _running(core: DecisionCore) -> list[Event]:
    out = core.arrive(Request("a", "assured", 0.0), Proposal(admit=False), 0.0)  # entitled: floor
    out += core.arrive(Request("o", "opp", 0.0), Proposal(), 0.0)
    return out + core.arrive(Request("q", "opp", 0.0), Proposal(), 0.0)  # queued: C = 2


def test_a_floor_request_or_one_not_running_is_refused_and_nothing_changes() -> None:
    core = DecisionCore(make_contract(slots=2))
    _running(core)
    pre = Preemption(core, grace=1.0)
    for rid, why in (("a", "admitted on the floor"), ("q", "not in flight"), ("zz", "not in flight")):
        with pytest.raises(EnforcementError, match=why) as err:
            pre.notice(rid, 0.0)
        assert err.value.status_hint == 409
    assert pre.pending == ()
    assert core.in_flight == 2


def test_stop_after_the_grace_fails_preempted_and_dispatches_the_next() -> None:
    core = DecisionCore(make_contract(slots=2))
    _running(core)
    pre = Preemption(core, grace=2.0)
    notice = pre.notice("o", 1.0)
    assert pre.notice("o", 1.5) is notice  # a second notice keeps the first deadline
    assert (pre.due(2.9), pre.due(3.0)) == ([], ["o"])
    out = pre.stop("o", 3.0)
    assert [(e.kind.value, e.rid) for e in out] == [("fail", "o"), ("dispatch", "q")]
    assert isinstance(out[0], Fail) and out[0].reason == PREEMPTED
    assert pre.stop("o", 3.0) == []  # once
    core._check()


def test_a_request_that_ends_within_its_grace_is_not_preempted() -> None:
    core = DecisionCore(make_contract(slots=2))
    _running(core)
    pre = Preemption(core, grace=5.0)
    pre.notice("o", 0.0)
    core.finish("o", 1.0)
    assert pre.stop("o", 5.0) == []
    assert pre.stopped == 0


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_bad_grace_or_retry_hint_is_a_spec_error(bad: float) -> None:
    core = DecisionCore(make_contract())
    with pytest.raises(SpecError):
        Preemption(core, grace=bad)
    with pytest.raises(SpecError):
        Preemption(core, retry_after=bad)


# -- hypothesis: any arrivals, any learner, any preemption calls --------------------------
_STEP = st.one_of(
    st.tuples(st.just("arrive"), st.sampled_from(["assured", "opp"]), st.booleans()),
    st.tuples(st.just("preempt"), st.integers(0, 30), st.floats(0.0, 2.0)),
    st.tuples(st.just("finish"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("wait"), st.floats(0.0, 1.0), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(_STEP, max_size=60), excess=st.sampled_from(["reject", "demote"]))
def test_the_enforcer_never_breaks_af_dr_wf_or_pr(steps: list[tuple[object, ...]], excess: str) -> None:
    contract = make_contract(slots=2, floor=2, excess=excess)
    core = DecisionCore(contract, deferred_drop=True)
    pre = Preemption(core, grace=0.5)
    trace: list[Event] = []
    now, n = 0.0, 0
    for kind, a, b in steps:
        if kind == "arrive":
            trace += core.arrive(Request(f"r{n}", str(a), now), Proposal(admit=bool(b)), now)
            n += 1
        elif kind == "preempt" and pre.preemptible(f"r{a}"):
            pre.notice(f"r{a}", now, grace=float(b))  # type: ignore[arg-type]
        elif kind == "finish" and core.running_basis(f"r{a}") is not None:
            trace += core.finish(f"r{a}", now, failed=bool(b))
        elif kind == "wait":
            now += float(a)  # type: ignore[arg-type]
        for rid in pre.due(now):
            trace += pre.stop(rid, now)
        core._check()
    trace += core.fail_queued(now)
    for rid in [r for r in by_rid(trace) if core.is_live(r)]:
        trace += core.cancel(rid, now)
    assert check_wf(trace) == []
    assert check_af(contract, trace) == []
    assert check_dr(contract, trace) == []
    assert check_pr(trace) == []


# -- the Guard --------------------------------------------------------------------------
async def _slow(request: Request) -> Response:
    await asyncio.sleep(30)
    return Response(text="late")


async def _wait_running(guard: Guard, rid: str) -> None:
    for _ in range(200):
        if rid in guard.running():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{rid} never ran")


async def test_the_guard_stops_a_preempted_dispatch_and_hands_back_a_retry_hint() -> None:
    trace: list[Event] = []
    backend = MockDispatcher(_slow)
    contract = make_contract(slots=1)
    async with Guard(
        contract, backend, sinks=[trace.append], clock=ManualClock(), config=GuardConfig(retry_after=2.5)
    ) as guard:
        opp = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0)))
        await _wait_running(guard, "o")
        with pytest.raises(EnforcementError):
            guard.preempt("nobody")
        guard.preempt("o", grace=0.01)
        out = await asyncio.wait_for(opp, 5.0)
    assert (out.status, out.reason, out.retry_after) == ("preempted", PREEMPTED, 2.5)
    assert [e.kind.value for e in trace] == ["arrive", "admit", "dispatch", "fail"]
    assert check_pr(trace) == []
    assert guard.statistics().in_flight == 0


async def test_the_guard_never_preempts_a_floor_request_and_the_grace_lets_one_finish() -> None:
    async def quick(request: Request) -> Response:
        await asyncio.sleep(0.02)
        return Response(text="done")

    trace: list[Event] = []
    contract = make_contract(slots=2)
    async with Guard(
        contract, MockDispatcher(quick), sinks=[trace.append], config=GuardConfig(preempt_grace=5.0)
    ) as guard:
        a = asyncio.ensure_future(guard.submit(Request("a", "assured", 0.0)))
        o = asyncio.ensure_future(guard.submit(Request("o", "opp", 0.0)))
        await _wait_running(guard, "a")
        await _wait_running(guard, "o")
        with pytest.raises(EnforcementError, match="floor"):
            guard.preempt("a")
        guard.preempt("o")
        done = await asyncio.gather(a, o)
    assert [x.status for x in done] == ["completed", "completed"]
    assert not any(isinstance(e, Fail) for e in trace)
    assert {e.rid for e in trace if isinstance(e, Arrive)} == {"a", "o"}
