"""The asyncio runtime around the decision core: slots, clock, sinks, a dispatcher.

`Guard` is a thin driver (STYLE rule 4): every decision comes from the pure
`DecisionCore`; the Guard takes each request in once (`entry`: bound, stamped,
capped; `submit` binds, `submit_bound` takes it as it is), asks the learner, feeds the
resulting events to its sinks and reports each dispatch's end back to the
core. The dispatch runs *inline*, in the coroutine that called ``submit``
(no task of the Guard's own): a queued request waits there for its slot,
then calls the dispatcher, so the dispatcher sees its caller's task and
context, and cancelling ``submit`` is cancelling the dispatch. Each live
request is one record (`_Call`). The Guard guarantees one terminal event
per admitted request, and a freed slot, whatever happens around it:

* the backend returns → ``complete``; raises or outlasts ``timeout`` →
  ``fail`` (the exception's text, or ``timeout``);
* the dispatch ends cancelled though neither its caller nor the Guard
  cancelled it (it awaited a future something else cancelled, as a
  batching backend may) → ``fail("CancelledError: ...")``, and the caller
  gets that outcome;
* the caller cancels its ``submit`` → ``fail("cancelled")`` (a queued
  request leaves the queue, a running one is interrupted where it waits),
  and the caller gets its `asyncio.CancelledError`;
* `aclose` stops accepting (``submit`` raises 503), then with ``drain``
  waits up to ``drain_timeout`` for the live requests to end by
  themselves; whatever is left (all of it without ``drain``) ends at once
  with ``fail("shutdown")``: a queued request leaves the queue and a
  running dispatch is cancelled inside its caller's coroutine, whose
  ``submit`` returns the ``shutdown`` outcome (the caller cancelled
  nothing: the Guard undoes its own cancellation request, as
  `asyncio.timeout` does). The slot is freed when the Guard ends the
  request: `aclose` never waits for a dispatcher that ignores cancellation;
* a sink that raises (a trace writer on a full disk) changes none of this:
  every event still reaches the other sinks in order and its effects are
  applied; then the ``submit`` of the request the event belongs to raises
  `SinkError` (carrying the outcome), and ``statistics().sink_errors``
  counts it. A learner that raises or answers garbage is a learner
  decision (`learners.consult`).

A request the identity layer refuses never reaches the core (no tenant to
put in a trace); its outcome is ``rejected`` with the binding's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..clock import Clock, MonotonicClock
from ..contract import Contract
from ..errors import EnforcementError, SinkError
from ..events import Complete, Dispatch, Drop, Event, Fail, Reject, is_client_error
from ..facts import RequestFacts
from .alertlog import warn_alerts
from .bounded import BoundedLearner
from .core import DecisionCore
from .dispatchers import ChunkSink, Dispatcher, Response, Stream, failure_reason, is_streaming
from .entry import BoundRequest, CreditPool, bind, spend
from .gate import tables_hook
from .guard_config import GuardConfig
from .headroom import HeadroomSource
from .identity import Identity, IdentityBinder
from .learners import AdmitAll, Learner, LoadView
from .outcome import GuardStatistics, Outcome, Status
from .preemption import PREEMPTED, Preemption
from .pressure import HeadroomLoop
from .redline import HeadroomSample
from .request import Request
from .sinks import JsonlSink, MonitorSink
from .stall import LoopWatchdog

__all__ = [
    "CreditPool",
    "Guard",
    "GuardConfig",
    "GuardStatistics",
    "JsonlSink",
    "MonitorSink",
    "Outcome",
    "Sink",
]

DISPATCH = Dispatch.code

Sink = Callable[[Event], object]
DEFAULT_CONFIG = GuardConfig()


_STATUS: dict[int, Status] = {
    Complete.code: "completed",
    Reject.code: "rejected",
    Drop.code: "dropped",
    Fail.code: "failed",
}


class _Call:
    """One live request in the Guard: what ``submit`` waits on and what the events set."""

    __slots__ = (
        "base",
        "busy",
        "dispatched",
        "error",
        "on_chunk",
        "outcome",
        "request",
        "response",
        "sink_error",
        "stop_timer",
        "stopping",
        "task",
        "wake",
    )

    def __init__(self, request: Request, task: asyncio.Task[Any] | None, on_chunk: ChunkSink | None) -> None:
        self.request = request
        self.task = task  # the submitter's task: the dispatch runs in it
        self.on_chunk = on_chunk  # the caller's reader of the streamed chunks
        self.wake: asyncio.Future[None] | None = None  # set while waiting for a slot
        self.dispatched = False
        self.busy = False  # inside an await the Guard does not own (the dispatcher)
        self.stopping = False  # the Guard asked ``task`` to stop (shutdown)
        self.base = 0  # ``task.cancelling()`` when the dispatch began (as `asyncio.timeout` keeps it)
        self.outcome: Outcome | None = None
        self.response: Response | None = None
        self.error: BaseException | None = None
        self.sink_error: SinkError | None = None
        self.stop_timer: asyncio.TimerHandle | None = None  # a preemption's grace running out

    def wake_up(self) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)


class Guard:
    """``async with Guard(contract, dispatcher, ...) as guard: await guard.submit(request, identity)``.

    Args:
        contract: the contract to enforce.
        dispatcher: the backend edge.
        learner: the untrusted proposer (default `AdmitAll`).
        sinks: callables taking each event; those with ``close()`` are closed on exit.
        clock: time source (default `MonotonicClock`).
        binder: identity binding; ``None`` trusts ``request.tenant`` as already bound.
        headroom: engine telemetry, polled into the core's redline (`HeadroomLoop`; the redline,
            interval and eviction channel are in ``config``).
        credits: a floor-credit pool shared with other replicas: each arrival of a floored
            tenant spends there first, in the window its arrival is stamped in, and the core
            grants no floor the pool refused (`Request.pool`).
        config: every setting (`GuardConfig`; default: the library's defaults).
    """

    def __init__(
        self,
        contract: Contract,
        dispatcher: Dispatcher,
        *,
        learner: Learner | None = None,
        sinks: Sequence[Sink] = (),
        clock: Clock | None = None,
        binder: IdentityBinder | None = None,
        headroom: HeadroomSource | None = None,
        credits: CreditPool | None = None,
        config: GuardConfig = DEFAULT_CONFIG,
    ) -> None:
        self.contract, self.config = contract, config
        self._credits = credits
        self._pooled = frozenset(contract.floored_tenants) if credits is not None else frozenset()
        self.core = DecisionCore(
            contract,
            dispatch_policy=config.dispatch_policy,
            deferred_drop=config.deferred_drop,
            gate_upper=config.gate_upper,
            watch=config.watch,
            redline=config.redline,
        )
        self.shield = tables_hook(self.core, config.properties, config.watch, shadow=config.shadow)
        self.preemption = Preemption(self.core, grace=config.preempt_grace, retry_after=config.retry_after)
        self._dispatcher = dispatcher
        self._streaming = dispatcher if is_streaming(dispatcher) else None  # takes a `Stream`
        self._asker = BoundedLearner(learner if learner is not None else AdmitAll(), config.learner_timeout)
        self._sinks = list(sinks)
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._binder, self._timeout = binder, config.timeout
        self._drain, self._drain_timeout = config.drain, config.drain_timeout
        self._calls: dict[str, _Call] = {}  # rid -> the live request's record
        self._idle: asyncio.Event | None = None  # set when the last live request ends (drain)
        self._open = False
        self._submitted = 0
        self._unauth = 0
        self._sink_errors = 0
        self._calling = 0
        #: the loop watchdog (``config.stall_threshold``): a stalled loop is a ``stall`` record
        self.stalls = LoopWatchdog(self._handle, self._clock, threshold=config.stall_threshold)
        #: the telemetry loop (``None`` without a headroom source)
        self.headroom = self._telemetry(headroom, config.headroom_interval, config.eviction)

    def _telemetry(
        self, source: HeadroomSource | None, interval: float, eviction: Any
    ) -> HeadroomLoop | None:
        if eviction is not None and source is None:
            raise EnforcementError("an eviction channel needs a headroom source to act on")
        if source is None:
            return None
        return HeadroomLoop(
            self, source, core=self.core, preemption=self.preemption, interval=interval, eviction=eviction
        )

    async def __aenter__(self) -> Guard:
        self._open = True
        self.stalls.start()
        if self.headroom is not None:
            self.headroom.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- public API --------------------------------------------------------------
    @property
    def clock(self) -> Clock:
        """The Guard's clock (every event's time is read from it)."""
        return self._clock

    async def submit(
        self, request: Request, identity: Identity | None = None, *, on_chunk: ChunkSink | None = None
    ) -> Outcome:
        """Run ``request`` through the guard and wait for its outcome; the dispatch runs here. The
        binder binds ``identity`` once, and the request is stamped and capped once (`entry.bind`).
        ``on_chunk`` is told each streamed chunk as it comes (a `StreamingDispatcher`'s `Stream`).

        Raises:
            EnforcementError: the guard is closed (503), ``on_chunk`` with a dispatcher that does
                not stream (500), or the core refuses the
                request (unknown tenant 403, a rid seen before 409, a bad deadline 400).
            SinkError: a sink raised on one of this request's events; the request
                was decided and finished regardless (``err.outcome``).
            asyncio.CancelledError: the caller was cancelled (the request is failed first).
        """
        self._check_submit(on_chunk)
        bound = bind(request, identity, self._binder, self.core.facts, self.contract, self._clock.now())
        if bound is None:
            self._unauth += 1
            return Outcome(request.rid, "rejected", "unauthenticated")
        return await self._enter(*bound, on_chunk)

    async def submit_bound(self, bound: BoundRequest, *, on_chunk: ChunkSink | None = None) -> Outcome:
        """As `submit`, for a request its caller bound and created complete (the gateway): taken as
        it is, with its facts (`entry`). Make it with `BoundRequest.create` in this step, stamped with
        `clock` (an arrival before the core's last event raises `TraceOrderError`).

        Raises:
            EnforcementError: as `submit`, and stamped later than now (500).
            SinkError, asyncio.CancelledError: as `submit`.
        """
        self._check_submit(on_chunk)
        if bound.request.t > self._clock.now():
            raise EnforcementError(f"request {bound.request.rid!r} is stamped in the future", status_hint=500)
        return await self._enter(bound.request, bound.facts, on_chunk)

    def _check_submit(self, on_chunk: ChunkSink | None) -> None:
        if not self._open:
            raise EnforcementError("the guard is not open (use 'async with')", status_hint=503)
        if on_chunk is not None and self._streaming is None:
            raise EnforcementError("on_chunk needs a dispatcher that streams (StreamingDispatcher)")
        self._submitted += 1

    async def _enter(
        self, request: Request, facts: RequestFacts | None, on_chunk: ChunkSink | None
    ) -> Outcome:
        """The core takes ``request`` (bound, stamped and capped from ``facts``), after the credit
        pool if it spends there; the decision and the dispatch follow in this coroutine."""
        if self._credits is not None and facts is not None and request.tenant in self._pooled:
            request = await self._spend(self._credits, request, facts.weight)
        now = request.t
        view = LoadView(now, self.core.in_flight, self.core.queue_depth, self.contract.slots)
        if self._asker.inline:  # rvguard's own learners: the proposal rides on the arrive
            events = self.core.arrive(request, self._asker.ask_now(request, view), now, facts)
            waits = False
        else:  # arrival stamped now; the learner asked later, only if its answer can matter
            events = self.core.receive(request, now, facts)
            waits = len(events) == 1  # the arrive alone: the decision is the learner's
        call = self._calls[request.rid] = _Call(request, asyncio.current_task(), on_chunk)  # the core took it
        self._handle(events)
        return await self._run(call, view if waits else None)

    async def _spend(self, pool: CreditPool, request: Request, weight: float) -> Request:
        """The pool's verdict on ``request`` (`entry.spend`), stamped when it came.

        Raises:
            EnforcementError: the guard closed meanwhile (503).
        """
        request = await spend(pool, request, weight, self._clock)
        if not self._open:
            raise EnforcementError(
                "the guard closed while the request waited for the credit pool", status_hint=503
            )
        return request

    def running(self) -> list[str]:
        """The rids in flight now (dispatched, not ended), in dispatch order."""
        return [rid for rid, call in self._calls.items() if call.dispatched and call.outcome is None]

    def preempt(self, rid: str, *, grace: float | None = None, resource: str = "") -> float:
        """Preempt running surplus request ``rid``: stopped after ``grace`` seconds (default: the
        Guard's ``preempt_grace``) unless it ends first; its caller gets the outcome ``preempted``
        with the retry hint; ``resource`` (whose floor was crossed) is named on its record. Returns when.

        Raises:
            EnforcementError: ``rid`` is not in flight, or was admitted on the floor (409).
        """
        notice = self.preemption.notice(rid, self._clock.now(), grace=grace, resource=resource)
        call = self._calls[rid]
        if call.stop_timer is None:
            delay = notice.stop_at - notice.at
            call.stop_timer = asyncio.get_running_loop().call_later(delay, self._stop_preempted, call)
        return notice.stop_at

    def request(self, rid: str) -> Request | None:
        """Live ``rid``'s request as the core took it (``None`` once it has ended)."""
        call = self._calls.get(rid)
        return None if call is None else call.request

    def evict_now(self, rid: str, state: int, reason: str, **decided: Any) -> bool:
        """Evict running surplus ``rid``: its ``evict`` event (``decided``: the channel's
        ``resource``, ``headroom``, ``target``, ``capacity``, for EV), then its preemption with no
        grace, in one step (nothing ends it in between). False when a user's table forbade a
        non-emergency eviction: nothing written, the request runs on. Raises as `preempt`, before
        writing anything."""
        now = self._clock.now()
        noticed = rid in self.preemption.noticed
        self.preemption.notice(rid, now, grace=0.0)
        events = self.core.evict(rid, now, state, reason, **decided)  # through the core's table and gate
        if not events:
            if not noticed:
                self.preemption.forget(rid)
            return False
        self._handle(events)
        self._stop_preempted(self._calls[rid])
        return True

    def observe_arrival_gap(self, gap: float) -> None:
        """A request waited ``gap`` s before its handler ran: judged now (an alert is traced now)."""
        self.core.observe_arrival_gap(gap, self._clock.now())
        self._handle([])

    def deliver(self, events: list[Event]) -> None:
        """Events the core decided outside a request's call (relief's) to the sinks and callers."""
        self._handle(events)

    def observe_headroom(self, sample: HeadroomSample) -> None:
        """Feed one sample to the core now, its events to the sinks (raises as `DecisionCore.observe`)."""
        self._handle(self.core.observe(sample, self._clock.now()))

    def _stop_preempted(self, call: _Call) -> None:
        """The grace is over: end the request ``preempted`` and stop its dispatch where it waits."""
        call.stop_timer = None
        self._handle(self.preemption.stop(call.request.rid, self._clock.now()))
        if (
            call.busy
            and call.task is not None
            and call.outcome is not None
            and call.outcome.status == "preempted"
        ):
            call.stopping = True
            call.task.cancel("rvguard: preempted")

    async def aclose(self) -> None:
        """Stop accepting; drain (or not), end what is left with ``shutdown``, close closable sinks."""
        if not self._open:
            return
        self._open = False
        await self.stalls.stop()
        if self.headroom is not None:
            await self.headroom.stop()
        if self._drain and self._calls:
            self._idle = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), self._drain_timeout)
        self._stop_all("shutdown")
        self._asker.close()
        self._close_sinks()

    def _close_sinks(self) -> None:
        """Close every closable sink; raise `SinkError` for the first that failed, after all."""
        first: SinkError | None = None
        for sink in self._sinks:
            close = getattr(sink, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - re-raised below, once every sink is closed
                self._sink_errors += 1
                err = SinkError(f"sink {sink!r} failed to close: {type(exc).__name__}: {exc}")
                err.__cause__ = exc
                first = first or err
        if first is not None:
            raise first from first.__cause__

    def statistics(self) -> GuardStatistics:
        """Counters now: submitted, identity rejects, live requests, dispatches under way, slots,
        queue, sink failures, and dispatches the U-gate found uncertain (``gate_upper``; the core's)."""
        return GuardStatistics(
            submitted=self._submitted,
            unauthenticated_rejects=self._unauth,
            live=len(self._calls),
            tasks=self._calling,
            in_flight=self.core.in_flight,
            queue_depth=self.core.queue_depth,
            sink_errors=self._sink_errors,
            uncertain=self.core.statistics().uncertain,
            learner_timeouts=self._asker.timeouts,
        )

    # -- one request, in its caller's coroutine ---------------------------------------
    async def _run(self, call: _Call, view: LoadView | None) -> Outcome:
        """Ask the learner (with ``view``, if the decision waits for it), wait for a slot,
        dispatch, and return the outcome; every way out ends the request once."""
        try:
            if view is not None:
                await self._decide(call, view)
            while call.outcome is None and not call.dispatched:
                call.wake = asyncio.get_running_loop().create_future()
                await call.wake
            if call.outcome is None:
                await self._dispatch(call)
        except asyncio.CancelledError as exc:  # a client's cancel says so: task.cancel(CLIENT_ERROR + ...)
            if not self._absorb_stop(call):
                msg = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
                self._end(call, msg if is_client_error(msg) else "cancelled")
                raise
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: end the request, then let it go
            self._end(call, type(exc).__name__)
            raise
        else:
            if call.stopping:  # a dispatcher that swallowed or converted the Guard's cancel
                self._absorb_stop(call)
        if call.sink_error is None:
            return call.outcome  # type: ignore[return-value]  # every way out of the try ended it
        return self._outcome(call)

    async def _decide(self, call: _Call, view: LoadView) -> None:
        """Ask the learner (under its deadline, off the loop) and let the core decide."""
        task = call.task
        call.base = 0 if task is None else task.cancelling()
        call.busy = True
        try:
            proposal = await self._asker.ask(call.request, view)
        finally:
            call.busy = False
        if self.core.awaits_decision(call.request.rid):  # not ended meanwhile (shutdown)
            self._handle(self.core.decide(call.request.rid, proposal, self._clock.now()))

    async def _dispatch(self, call: _Call) -> None:
        """Call the backend; report how it ended (a cancel aimed at the caller propagates)."""
        task = call.task
        before = call.base = 0 if task is None else task.cancelling()
        self._calling += 1
        call.busy = True
        try:
            if self._timeout is None:
                response = await self._backend(call)
            else:
                async with asyncio.timeout(self._timeout):
                    response = await self._backend(call)
        except asyncio.CancelledError as exc:
            if task is None or task.cancelling() > before:
                raise  # the caller's or the Guard's cancel: _run decides
            self._finished(call, exc, f"CancelledError: {_detail(exc, 'the backend cancelled the dispatch')}")
        except TimeoutError as exc:
            self._finished(call, exc, "timeout")
        except Exception as exc:  # noqa: BLE001 - a backend failure is the request's fail event
            self._finished(call, exc, failure_reason(exc))
        else:
            call.response = response
            if call.outcome is None:  # the common case, without a call
                self._handle(self.core.finish(call.request.rid, self._clock.now()))
        finally:
            call.busy = False
            self._calling -= 1

    def _backend(self, call: _Call) -> Awaitable[Response]:
        """The dispatcher's call: with a `Stream` when it streams and someone reads the stream (the
        caller's chunks, relief's S), else with the request alone."""
        streaming = self._streaming
        if streaming is None:
            return self._dispatcher.dispatch(call.request)
        tokens = None if self.headroom is None else self.headroom.counter(call.request.rid)
        if call.on_chunk is None and tokens is None:
            return streaming.dispatch(call.request)
        return streaming.dispatch(call.request, stream=Stream(call.on_chunk, tokens))

    def _finished(self, call: _Call, exc: BaseException | None, reason: str) -> None:
        """The dispatch ended: complete or fail it unless the Guard already ended it (shutdown)."""
        if call.outcome is not None:  # set exactly when its terminal event was applied
            return
        call.error = exc
        now = self._clock.now()
        self._handle(self.core.finish(call.request.rid, now, failed=exc is not None, reason=reason))

    def _end(self, call: _Call, reason: str) -> None:
        """End a live request now (queued or running: ``fail(reason)``); a no-op once it has ended."""
        if self.core.is_live(call.request.rid):
            self._handle(self.core.cancel(call.request.rid, self._clock.now(), reason))

    def _absorb_stop(self, call: _Call) -> bool:
        """True when the pending cancel of the caller's task was the Guard's own (now undone)."""
        if not call.stopping or call.task is None:
            return False
        call.stopping = False
        return call.task.uncancel() <= call.base

    def _outcome(self, call: _Call) -> Outcome:
        outcome = call.outcome
        assert outcome is not None  # every way out of _run ended the request
        if call.sink_error is not None:
            call.sink_error.outcome = outcome
            raise call.sink_error
        return outcome

    def _stop_all(self, reason: str) -> None:
        """End every live request with ``reason``: queued ones leave the queue, running ones are
        cancelled inside their callers' coroutines (who get the outcome, not a cancellation)."""
        self._handle(self.core.fail_queued(self._clock.now(), reason))
        me = asyncio.current_task()
        for call in list(self._calls.values()):
            self._end(call, reason)
            if call.busy and call.task is not None and call.task is not me:
                call.stopping = True
                call.task.cancel(f"rvguard: {reason}")

    # -- events --------------------------------------------------------------------
    def _handle(self, events: list[Event]) -> None:
        """Feed ``events``, then the watch's alerts (logged), to every sink in order; apply them."""
        if alerts := self.core.drain_alerts():
            warn_alerts(alerts)
            events = [*events, *alerts]
        if self.shield is not None:  # the tables' hook: its ``shield`` alert records follow the events
            events = self.shield.through(events)
        for ev in events:
            for sink in self._sinks:
                try:
                    sink(ev)
                except Exception as exc:  # noqa: BLE001 - raised to the request's caller by submit
                    self._sink_failed(sink, ev, exc)
        for ev in events:
            code = ev.code
            if code == DISPATCH:
                call = self._calls[ev.rid]
                call.dispatched = True
                if call.wake is not None:
                    call.wake_up()
            elif code in _STATUS:
                self._resolve(ev, _STATUS[code])  # type: ignore[arg-type]

    def _sink_failed(self, sink: Sink, ev: Event, exc: Exception) -> None:
        self._sink_errors += 1
        call = self._calls.get(ev.rid)
        if call is None or call.sink_error is not None:
            return  # the first failure is the one reported
        kind = ev.kind.value
        err = SinkError(
            f"sink {sink!r} failed on {kind} of {ev.rid!r}: {type(exc).__name__}: {exc}", event=ev
        )
        err.__cause__ = exc
        call.sink_error = err

    def _resolve(self, ev: Reject | Complete | Drop | Fail, status: Status) -> None:
        call = self._calls.pop(ev.rid)
        reason = "" if status == "completed" else ev.reason  # type: ignore[union-attr]
        retry = None
        if status == "failed" and reason == PREEMPTED:
            status, retry = "preempted", self.preemption.retry_after
        call.outcome = Outcome(ev.rid, status, reason, call.response, call.error, retry)
        self.preemption.forget(ev.rid)
        if call.stop_timer is not None:
            call.stop_timer.cancel()
        if call.wake is not None:
            call.wake_up()
        if not self._calls and self._idle is not None:
            self._idle.set()


def _detail(exc: BaseException, default: str) -> str:
    """An exception's message (``default`` when empty or when printing it raises)."""
    try:
        return str(exc) or default
    except Exception:  # noqa: BLE001 - a backend's unprintable error is still its failure
        return default or "<unprintable>"
