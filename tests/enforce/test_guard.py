"""The asyncio Guard: outcomes, failing/hanging/cancelled backends, shutdown, sinks, identity."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import random
import threading
import time
from pathlib import Path

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard, JsonlSink, MonitorSink, Outcome
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.identity import Identity, IdentityBinder, sign_claim
from rvguard.enforce.learners import LearnerFailure, RejectAll
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, SinkError
from rvguard.events import Arrive, Event, Fail, Proposal, Reject, event_from_dict
from rvguard.monitors import Monitor

from ._harness import STATUS_OF, check_af, check_wf, make_contract, terminal_counts


def req(rid: str, tenant: str = "assured", **kw: object) -> Request:
    return Request(rid, tenant, 0.0, **kw)  # type: ignore[arg-type]


async def ok(request: Request) -> Response:
    await asyncio.sleep(0)
    return Response(text="hi", output_tokens=request.max_tokens)


def assert_conserved(trace: list[Event], guard: Guard) -> None:
    arrived = {e.rid for e in trace if isinstance(e, Arrive)}
    assert terminal_counts(trace) == dict.fromkeys(arrived, 1)
    assert check_wf(trace) == []
    stats = guard.statistics()
    assert (stats.in_flight, stats.queue_depth, stats.live, stats.tasks) == (0, 0, 0, 0)


async def test_completes_and_feeds_sinks() -> None:
    contract = make_contract(output_cap=8)
    trace: list[Event] = []
    monitor = Monitor(contract, properties=("AF", "DR", "WF"))
    violations: list[object] = []
    backend = MockDispatcher(ok)
    sinks = [trace.append, MonitorSink(monitor, on_violation=violations.append)]
    async with Guard(contract, backend, learner=RejectAll(), sinks=sinks, clock=ManualClock()) as guard:
        out = await guard.submit(req("a", max_tokens=100))
        opp = await guard.submit(req("o", "opp"))
    assert out.status == "completed"
    assert out.response is not None
    assert out.response.output_tokens == 8  # the cap reaches the backend
    assert backend.calls[0].max_tokens == 8
    assert (opp.status, opp.reason) == ("rejected", "learner")
    assert violations == []
    assert_conserved(trace, guard)


async def test_backend_exception_and_timeout_become_fail_and_free_the_slot() -> None:
    contract = make_contract(slots=1, floor=10)

    async def handler(request: Request) -> Response:
        if request.rid == "boom":
            raise RuntimeError("backend exploded")
        if request.rid == "hang":
            await asyncio.sleep(3600)
        return Response()

    trace: list[Event] = []
    async with Guard(
        contract, MockDispatcher(handler), sinks=[trace.append], config=GuardConfig(timeout=0.05)
    ) as guard:
        outs = await asyncio.gather(
            guard.submit(req("boom")), guard.submit(req("hang")), guard.submit(req("fine"))
        )
    assert [o.status for o in outs] == ["failed", "failed", "completed"]
    assert outs[0].reason == "RuntimeError: backend exploded"
    assert isinstance(outs[0].error, RuntimeError)
    assert outs[1].reason == "timeout"
    assert_conserved(trace, guard)


async def test_client_cancel_releases_queued_and_running_slots() -> None:
    contract = make_contract(slots=1, floor=10)
    release = asyncio.Event()

    async def handler(request: Request) -> Response:
        await release.wait()
        return Response()

    trace: list[Event] = []
    async with Guard(contract, MockDispatcher(handler), sinks=[trace.append]) as guard:
        running = asyncio.create_task(guard.submit(req("run")))
        queued = asyncio.create_task(guard.submit(req("queued")))
        after = asyncio.create_task(guard.submit(req("after")))
        await asyncio.sleep(0.01)
        assert (guard.core.in_flight, guard.core.queue_depth) == (1, 2)
        queued.cancel()
        running.cancel()
        await asyncio.sleep(0.01)
        assert guard.core.in_flight == 1  # "after" took the freed slot
        release.set()
        assert (await after).status == "completed"
        for task in (queued, running):
            with pytest.raises(asyncio.CancelledError):
                await task
    fails = {e.rid: e.reason for e in trace if e.kind.value == "fail"}
    assert fails == {"queued": "cancelled", "run": "cancelled"}
    assert_conserved(trace, guard)


async def test_shutdown_without_drain_fails_everything_left() -> None:
    contract = make_contract(slots=1, floor=10)

    async def hang(request: Request) -> Response:
        await asyncio.sleep(3600)
        return Response()

    trace: list[Event] = []
    guard = Guard(contract, MockDispatcher(hang), sinks=[trace.append], config=GuardConfig(drain=False))
    async with guard:
        tasks = [asyncio.create_task(guard.submit(req(f"r{i}"))) for i in range(3)]
        await asyncio.sleep(0.01)
    outs = await asyncio.gather(*tasks)
    assert {(o.status, o.reason) for o in outs} == {("failed", "shutdown")}
    assert_conserved(trace, guard)
    with pytest.raises(EnforcementError, match="not open") as err:
        await guard.submit(req("late"))
    assert err.value.status_hint == 503


async def test_drain_waits_for_running_requests() -> None:
    contract = make_contract(slots=1, floor=10)

    async def slow(request: Request) -> Response:
        await asyncio.sleep(0.02)
        return Response()

    trace: list[Event] = []
    async with Guard(contract, MockDispatcher(slow), sinks=[trace.append]) as guard:
        tasks = [asyncio.create_task(guard.submit(req(f"r{i}"))) for i in range(3)]
        await asyncio.sleep(0)
    assert [t.result().status for t in tasks] == ["completed"] * 3
    assert_conserved(trace, guard)


async def test_chaos_no_leaked_slot_no_lost_request() -> None:
    """Random failures, hangs and client cancels over many concurrent requests."""
    contract = make_contract(slots=3, floor=4)
    rng = random.Random(7)

    async def chaos(request: Request) -> Response:
        roll = rng.random()
        if roll < 0.2:
            raise ConnectionResetError("reset by peer")
        await asyncio.sleep(0.05 if roll < 0.3 else rng.random() * 0.005)
        return Response()

    trace: list[Event] = []
    async with Guard(
        contract, MockDispatcher(chaos), sinks=[trace.append], config=GuardConfig(timeout=0.02)
    ) as guard:
        tasks = [
            asyncio.create_task(guard.submit(req(f"r{i}", rng.choice(["assured", "opp"])))) for i in range(80)
        ]
        for task in rng.sample(tasks, 15):
            await asyncio.sleep(0.001)
            task.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    finished = [d for d in done if not isinstance(d, BaseException)]
    assert len(finished) + sum(isinstance(d, asyncio.CancelledError) for d in done) == 80
    assert_conserved(trace, guard)
    assert check_af(contract, trace) == []


async def test_jsonl_sink_writes_a_readable_trace(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    async with Guard(make_contract(), MockDispatcher(ok), sinks=[JsonlSink(path)]) as guard:
        await guard.submit(req("a", prompt_tokens=3))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    # the mock answers at once, faster than L = 0.1 s: the watch (on by default) says so in the trace
    assert [r["kind"] for r in records] == ["arrive", "admit", "dispatch", "complete", "alert"]
    assert [event_from_dict(r).rid for r in records] == ["a"] * 4 + [""]
    assert records[-1]["condition"] == "service-low" and records[-1]["bound"] == 0.1


async def test_identity_binding_decides_the_tenant() -> None:
    contract = make_contract(slots=1, floor=10)
    secret = b"k" * 32
    clock = ManualClock(100.0)
    wall = ManualClock(100.0)  # claim expiry is Unix time, read from the binder's own wall clock
    binder = IdentityBinder(contract, api_keys={"key-a": "assured"}, secret=secret, wall_clock=wall)
    trace: list[Event] = []
    async with Guard(contract, MockDispatcher(ok), sinks=[trace.append], clock=clock, binder=binder) as guard:
        # the request claims "assured", the credential decides
        await guard.submit(req("k", "assured"), Identity(api_key="key-a"))
        await guard.submit(req("c", "opp"), Identity(claim=sign_claim("assured", 200.0, secret)))
        await guard.submit(
            req("x", "assured"), Identity(claim=sign_claim("assured", 50.0, secret))
        )  # expired
        await guard.submit(req("n", "assured"))  # no credential
    tenants = {e.rid: e.tenant for e in trace if isinstance(e, Arrive)}
    assert tenants == {"k": "assured", "c": "assured", "x": "opp", "n": "opp"}

    strict = IdentityBinder(contract, unauthenticated="reject")
    async with Guard(contract, MockDispatcher(ok), binder=strict) as guard:
        out = await guard.submit(req("z"), Identity(api_key="nope"))
    assert (out.status, out.reason) == ("rejected", "unauthenticated")
    assert guard.statistics().unauthenticated_rejects == 1


class _Boom:
    """A learner that raises."""

    def propose(self, request: Request, view: object) -> object:
        raise ValueError("boom")


class _Raising(Proposal):
    """A `Proposal` subclass whose ``admit`` raises when read."""

    def __getattribute__(self, name: str) -> object:
        if name == "admit":
            raise RuntimeError("admit exploded")
        return super().__getattribute__(name)


class _Returns:
    """A learner that returns ``value`` (ill-typed on purpose)."""

    def __init__(self, value: object) -> None:
        self.value = value

    def propose(self, request: Request, view: object) -> object:
        return self.value


@pytest.mark.parametrize(
    ("learner", "why"),
    [
        (_Boom(), "ValueError: boom"),
        (_Returns(None), "TypeError: propose returned NoneType, not a Proposal"),
        (_Returns(Proposal(admit="yes")), "TypeError: Proposal.admit must be a bool"),  # type: ignore[arg-type]
        (_Returns(Proposal(priority_hint="high")), "TypeError: Proposal.priority_hint"),  # type: ignore[arg-type]
        (_Returns(LearnerFailure(priority_hint="x", reason="ValueError: mine")), "ValueError: mine"),  # type: ignore[arg-type]
        (_Returns(LearnerFailure(reason=None)), "TypeError: LearnerFailure.reason"),  # type: ignore[arg-type]
        (_Returns(_Raising()), "RuntimeError: admit exploded"),
    ],
)
async def test_issue_learner_failure_cannot_take_the_floor(learner: object, why: str) -> None:
    """A learner that raises or returns garbage: entitled requests still get the floor, all traced."""
    contract = make_contract(floor=1)
    trace: list[Event] = []
    monitor = Monitor(contract, properties=("AF", "DR", "WF"))
    sinks = [trace.append, MonitorSink(monitor)]
    async with Guard(contract, MockDispatcher(ok), learner=learner, sinks=sinks, clock=ManualClock()) as g:  # type: ignore[arg-type]
        floor = await g.submit(req("a"))
        excess = await g.submit(req("b"))
        opp = await g.submit(req("o", "opp"))
    assert floor.status == "completed"
    assert (excess.status, opp.status) == ("rejected", "rejected")
    assert excess.reason == "excess"  # beyond B: the contract's rule, not the learner's
    assert opp.reason == "learner-error: " + why.partition(":")[0]  # bounded: a metrics label
    arrivals = [e for e in trace if isinstance(e, Arrive)]
    assert len(arrivals) == 3 and all(a.proposal is None for a in arrivals)  # recorded before asking
    decision = next(e for e in trace if isinstance(e, Reject) and e.rid == "o")  # only o was asked
    assert decision.extra["learner_error"].startswith(why)  # the message is on the decision
    assert decision.extra["proposal"] == {"admit": False}
    assert monitor.violations() == []
    assert check_af(contract, trace) == []
    assert_conserved(trace, g)


class _Interrupt(BaseException):
    pass


class _Halts:
    def propose(self, request: Request, view: object) -> object:
        raise _Interrupt


async def test_learner_base_exceptions_are_failures_off_the_loop_and_propagate_inline() -> None:
    """In its own thread nothing a learner raises can be the process stopping: it is a failure.
    Asked inline (``learner_timeout=None``), a BaseException propagates before anything is traced."""
    trace: list[Event] = []
    async with Guard(make_contract(), MockDispatcher(ok), learner=_Halts(), sinks=[trace.append]) as g:  # type: ignore[arg-type]
        out = await g.submit(req("o", "opp"))
    assert (out.status, out.reason) == ("rejected", "learner-error: _Interrupt")
    assert_conserved(trace, g)
    inline: list[Event] = []
    learner = _Halts()
    async with Guard(
        make_contract(),
        MockDispatcher(ok),
        learner=learner,
        sinks=[inline.append],
        config=GuardConfig(learner_timeout=None),
    ) as g:  # type: ignore[arg-type]
        with pytest.raises(_Interrupt):
            await g.submit(req("a"))
    assert inline == []
    assert g.statistics().live == 0


@pytest.mark.parametrize("guard_start", [0.0, 1e12])
async def test_issue_expired_claims_are_refused_whatever_the_guard_clock(guard_start: float) -> None:
    """A restarted guard (clock at 0) or one far ahead must judge expiry on Unix time."""
    contract = make_contract(floor=10)
    secret = b"k" * 32
    binder = IdentityBinder(contract, secret=secret)  # the default wall clock: time.time()
    stale = Identity(claim=sign_claim("assured", time.time() - 3600, secret))
    fresh = Identity(claim=sign_claim("assured", time.time() + 3600, secret))
    trace: list[Event] = []
    clock = ManualClock(guard_start)
    async with Guard(contract, MockDispatcher(ok), sinks=[trace.append], clock=clock, binder=binder) as g:
        await g.submit(req("stale", "assured"), stale)
        await g.submit(req("fresh", "opp"), fresh)
    assert {e.rid: e.tenant for e in trace if isinstance(e, Arrive)} == {"stale": "opp", "fresh": "assured"}


class _FullDisk:
    """A sink that fails on some events (a trace writer on a full disk)."""

    def __init__(self, kinds: frozenset[str]) -> None:
        self.kinds = kinds
        self.seen: list[Event] = []

    def __call__(self, ev: Event) -> None:
        self.seen.append(ev)
        if ev.kind.value in self.kinds:
            raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    "kinds", [frozenset({"arrive"}), frozenset({"dispatch"}), frozenset({"complete", "reject"})]
)
async def test_issue_a_failing_sink_never_hangs_submit_nor_skips_effects(kinds: frozenset[str]) -> None:
    contract = make_contract(slots=1, floor=2)
    before: list[Event] = []
    after: list[Event] = []
    disk = _FullDisk(kinds)
    sinks = [before.append, disk, after.append]
    async with Guard(contract, MockDispatcher(ok), sinks=sinks, learner=RejectAll()) as guard:
        rids = ["a", "b", "c", "o"]
        tasks = [asyncio.create_task(guard.submit(req(r, "opp" if r == "o" else "assured"))) for r in rids]
        done = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5.0)
    for rid, got in zip(rids, done, strict=True):
        evs = [e for e in before if e.rid == rid]
        touched = any(e.kind.value in kinds for e in evs)
        if touched:
            assert isinstance(got, SinkError), (rid, got)
            assert got.status_hint == 500 and isinstance(got.__cause__, OSError)
            assert isinstance(got.outcome, Outcome) and got.outcome.rid == rid
            assert got.outcome.status == STATUS_OF[evs[-1].kind.value]  # the outcome applied regardless
        else:
            assert isinstance(got, Outcome), (rid, got)
    assert after == before == disk.seen  # every sink saw every event, in order
    assert_conserved(before, guard)
    assert guard.statistics().sink_errors == sum(e.kind.value in kinds for e in before) > 0


async def test_a_sink_failing_on_close_does_not_stop_the_others_closing() -> None:
    class Closing:
        def __init__(self, fail: bool) -> None:
            self.fail, self.closed = fail, False

        def __call__(self, ev: Event) -> None:
            pass

        def close(self) -> None:
            self.closed = True
            if self.fail:
                raise OSError("flush failed")

    sinks = [Closing(True), Closing(False)]
    guard = Guard(make_contract(), MockDispatcher(ok), sinks=sinks)
    await guard.__aenter__()
    with pytest.raises(SinkError, match="flush failed"):
        await guard.aclose()
    assert [s.closed for s in sinks] == [True, True]
    assert guard.statistics().sink_errors == 1


async def test_statistics_report_the_u_gates_uncertain_dispatches() -> None:
    contract = make_contract(slots=1, floor=10, deadline=1.0, upper=0.8)
    clock = ManualClock()
    gate = asyncio.Event()

    async def held(request: Request) -> Response:
        await gate.wait()
        return Response()

    async with Guard(
        contract, MockDispatcher(held), clock=clock, config=GuardConfig(gate_upper=True)
    ) as guard:
        first = asyncio.create_task(guard.submit(req("a")))
        second = asyncio.create_task(guard.submit(req("b")))
        await asyncio.sleep(0)
        clock.advance(0.5)  # b waits: dispatched at 0.5, 0.5 + U = 1.3 > its deadline 1.0
        gate.set()
        await asyncio.gather(first, second)
    assert guard.statistics().uncertain == guard.core.statistics().uncertain == 1


async def test_issue_10_8_the_guard_refuses_a_rid_reused_after_it_ended() -> None:
    """A second 'a' after the first ended used to be served: the trace then failed WF (failed before)."""
    contract = make_contract(floor=10)
    trace: list[Event] = []
    monitor = Monitor(contract, properties=("WF",))
    async with Guard(contract, MockDispatcher(ok), sinks=[trace.append, MonitorSink(monitor)]) as guard:
        assert (await guard.submit(req("a"))).status == "completed"
        assert (await guard.submit(req("o", "opp"))).status == "completed"
        for rid in ("a", "o"):
            with pytest.raises(EnforcementError, match="already ended") as err:
                await guard.submit(req(rid))
            assert err.value.status_hint == 409
        with pytest.raises(EnforcementError, match="deadline") as late:
            await guard.submit(req("b", deadline=-1.0))
        assert late.value.status_hint == 400
    assert monitor.violations() == []
    assert [e.rid for e in trace if isinstance(e, Arrive)] == ["a", "o"]
    assert_conserved(trace, guard)


async def test_issue_10_5_a_dispatch_cancelled_by_someone_else_frees_its_slot() -> None:
    """The dispatcher awaited a future a third party cancelled: both slots leaked (failed before)."""
    contract = make_contract(slots=2, floor=10)
    batch: asyncio.Future[Response] = asyncio.get_running_loop().create_future()

    async def batching(request: Request) -> Response:
        if request.rid.startswith("b"):
            return await batch  # a batching backend's shared future
        return Response()

    trace: list[Event] = []
    async with Guard(
        contract, MockDispatcher(batching), sinks=[trace.append], config=GuardConfig(drain_timeout=1.0)
    ) as guard:
        held = [asyncio.create_task(guard.submit(req(f"b{i}"))) for i in range(2)]
        await asyncio.sleep(0.01)
        batch.cancel()  # neither the Guard nor the callers cancelled anything
        later = [guard.submit(req(f"r{i}")) for i in range(4)]
        outs = await asyncio.wait_for(asyncio.gather(*held, *later), 2.0)
    assert [o.status for o in outs] == ["failed"] * 2 + ["completed"] * 4
    assert all(o.reason.startswith("CancelledError") for o in outs[:2])
    assert_conserved(trace, guard)


async def test_issue_16_2_the_dispatch_runs_in_the_submitting_coroutine() -> None:
    """Inline: the dispatcher sees its caller's task and context, also when it waited in the queue."""
    contract = make_contract(slots=1, floor=10)
    who: contextvars.ContextVar[str] = contextvars.ContextVar("who")
    seen: dict[str, tuple[str, bool]] = {}
    tasks: dict[str, asyncio.Task[object] | None] = {}

    async def record(request: Request) -> Response:
        await asyncio.sleep(0.001)
        seen[request.rid] = (who.get(), asyncio.current_task() is tasks[request.rid])
        return Response()

    async def caller(guard: Guard, rid: str) -> Outcome:
        who.set(rid)
        tasks[rid] = asyncio.current_task()
        return await guard.submit(req(rid))

    async with Guard(contract, MockDispatcher(record)) as guard:
        await asyncio.gather(*(caller(guard, f"r{i}") for i in range(4)))
    assert seen == {f"r{i}": (f"r{i}", True) for i in range(4)}


async def _hang(request: Request) -> Response:
    await asyncio.sleep(3600)
    return Response()


async def test_aclose_drain_timeout_then_shutdown_and_no_new_work_meanwhile() -> None:
    """Drain waits ``drain_timeout``, refuses new submits meanwhile, then ends the rest as shutdown."""
    contract = make_contract(slots=1, floor=10)
    trace: list[Event] = []
    guard = Guard(
        contract, MockDispatcher(_hang), sinks=[trace.append], config=GuardConfig(drain_timeout=0.05)
    )
    await guard.__aenter__()
    tasks = [asyncio.create_task(guard.submit(req(f"r{i}"))) for i in range(2)]
    await asyncio.sleep(0.01)
    closing = asyncio.create_task(guard.aclose())
    await asyncio.sleep(0.01)
    assert not closing.done()  # still draining
    with pytest.raises(EnforcementError, match="not open"):
        await guard.submit(req("late"))
    t0 = time.monotonic()
    await closing
    assert time.monotonic() - t0 < 1.0
    outs = await asyncio.gather(*tasks)  # outcomes, not cancellations: the callers cancelled nothing
    assert [(o.status, o.reason) for o in outs] == [("failed", "shutdown")] * 2
    assert_conserved(trace, guard)


async def test_a_caller_cancelled_during_shutdown_still_sees_its_cancellation() -> None:
    contract = make_contract(slots=1, floor=10)
    trace: list[Event] = []
    guard = Guard(contract, MockDispatcher(_hang), sinks=[trace.append], config=GuardConfig(drain=False))
    await guard.__aenter__()
    task = asyncio.create_task(guard.submit(req("r")))
    await asyncio.sleep(0.01)
    task.cancel()  # the caller's own cancel, in the same tick as the Guard's
    await guard.aclose()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = trace[-1]
    assert isinstance(last, Fail) and (last.rid, last.reason) == ("r", "shutdown")
    assert_conserved(trace, guard)


async def test_aclose_never_waits_for_a_dispatcher_that_ignores_cancellation() -> None:
    """The slot is freed when the Guard ends the request; the stubborn call returns the outcome later."""
    contract = make_contract(slots=1, floor=10)
    release = asyncio.Event()

    async def stubborn(request: Request) -> Response:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return Response(text="late")

    trace: list[Event] = []
    guard = Guard(contract, MockDispatcher(stubborn), sinks=[trace.append], config=GuardConfig(drain=False))
    await guard.__aenter__()
    task = asyncio.create_task(guard.submit(req("r")))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(guard.aclose(), 1.0)
    assert (guard.core.in_flight, guard.statistics().live) == (0, 0)
    assert not task.done()
    release.set()
    out = await task
    assert (out.status, out.reason, out.response) == ("failed", "shutdown", None)
    assert [e.kind.value for e in trace] == ["arrive", "admit", "dispatch", "fail"]


class _Sleepy:
    """A synchronous learner that blocks on opportunistic requests (a slow model call)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.asked: list[str] = []

    def propose(self, request: Request, view: object) -> Proposal:
        self.asked.append(request.rid)
        if request.tenant == "opp":
            time.sleep(self.seconds)
        return Proposal()


async def test_issue_10_1_a_slow_learner_stalls_nothing_and_its_overrun_rejects_the_surplus() -> None:
    """The learner ran on the event loop, unbounded: one slow answer delayed everything (failed before)."""
    contract = make_contract(floor=10)
    trace: list[Event] = []
    learner = _Sleepy(1.0)
    async with Guard(
        contract,
        MockDispatcher(ok),
        learner=learner,
        sinks=[trace.append],
        config=GuardConfig(learner_timeout=0.05),
    ) as guard:
        t_opp = time.monotonic()
        opp = asyncio.create_task(guard.submit(req("o", "opp")))
        await asyncio.sleep(0.005)
        t0 = time.monotonic()
        assured = await guard.submit(req("a"))
        assert time.monotonic() - t0 < 0.5  # the floor never waits for the learner (it takes 1 s)
        out = await opp
        assert time.monotonic() - t_opp < 0.5  # the deadline, not the learner, ends the wait
        assert guard.statistics().learner_timeouts == 1
    assert assured.status == "completed"
    assert (out.status, out.reason) == ("rejected", "learner-timeout")
    assert learner.asked == ["o"]  # the learner is asked only where its answer can matter
    arrive, reject = [e for e in trace if e.rid == "o"]
    assert isinstance(arrive, Arrive) and arrive.proposal is None
    assert reject.t - arrive.t >= 0.05  # stamped when it reached the guard, before the learner
    assert reject.extra["learner_error"].startswith("timeout")
    assert_conserved(trace, guard)


class _Never:
    """Learners that never answer: a blocked thread, or a coroutine that ignores cancellation."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def propose(self, request: Request, view: object) -> Proposal:
        self.gate.wait(5.0)  # released at the end of the test
        return Proposal()


class _NeverAsync:
    def __init__(self) -> None:
        self.gate = threading.Event()

    async def propose(self, request: Request, view: object) -> Proposal:
        while not self.gate.is_set():  # ignores cancellation until the test ends (else the loop
            with contextlib.suppress(asyncio.CancelledError):  # could never close: asyncio.run
                await asyncio.sleep(0.01)  # waits for every task it cancels at exit)
        return Proposal()


@pytest.mark.parametrize("learner", [_Never(), _NeverAsync()])
async def test_issue_10_1_a_learner_that_never_returns_costs_each_request_at_most_its_deadline(
    learner: object,
) -> None:
    contract = make_contract(floor=2)
    trace: list[Event] = []
    g = Guard(
        contract,
        MockDispatcher(ok),
        learner=learner,  # type: ignore[arg-type]
        sinks=[trace.append],
        config=GuardConfig(learner_timeout=0.02),
    )
    async with g:
        t0 = time.monotonic()
        outs = await asyncio.gather(
            *(g.submit(req(f"r{i}", "assured" if i < 3 else "opp")) for i in range(8))
        )
        assert time.monotonic() - t0 < 1.0
    learner.gate.set()  # type: ignore[attr-defined]
    assert [(o.status, o.reason) for o in outs[:3]] == [("completed", "")] * 2 + [("rejected", "excess")]
    assert {(o.status, o.reason) for o in outs[3:]} == {("rejected", "learner-timeout")}
    assert g.statistics().learner_timeouts == 5
    assert check_af(contract, trace) == []
    assert_conserved(trace, g)


class _Rewriter:
    """A learner that tries to rewrite what is forwarded, by item and by force."""

    def __init__(self, how: str) -> None:
        self.how = how

    def propose(self, request: Request, view: object) -> Proposal:
        if self.how == "item":
            request.payload["body"]["prompt"] = "rewritten"  # type: ignore[index]
        elif self.how == "nested":
            request.payload["body"]["messages"].append({"role": "system", "content": "obey"})  # type: ignore[index]
        else:  # frozen dataclasses yield to object.__setattr__: only a copy may be hurt
            object.__setattr__(request, "max_tokens", 10**6)
            object.__setattr__(request, "payload", {"body": {"prompt": "rewritten"}})
        return Proposal()


@pytest.mark.parametrize("how", ["item", "nested", "force"])
async def test_issue_10_3_the_learner_cannot_rewrite_what_is_forwarded(how: str) -> None:
    """The learner got the request itself, mutable body and all (failed before)."""
    body = {"prompt": "hello", "messages": [{"role": "user", "content": "hi"}]}
    backend = MockDispatcher(ok)
    async with Guard(make_contract(), backend, learner=_Rewriter(how)) as guard:  # type: ignore[arg-type]
        out = await guard.submit(req("o", "opp", max_tokens=8, payload={"body": body}))
    assert body == {"prompt": "hello", "messages": [{"role": "user", "content": "hi"}]}
    if how == "force":  # it changed its own copy and admitted: the original was forwarded
        assert out.status == "completed"
        sent = backend.calls[0]
        assert (sent.max_tokens, sent.payload["body"]["prompt"]) == (8, "hello")
    else:  # writing to a read-only view raised: a failed learner, the surplus rejected
        assert out.status == "rejected" and out.reason in (
            "learner-error: TypeError",
            "learner-error: AttributeError",
        )
        assert backend.calls == []
