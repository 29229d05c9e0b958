"""The asyncio runtime around the decision core: slots, clock, sinks, a dispatcher.

`Guard` is a thin driver (STYLE rule 4): every decision comes from the pure
`DecisionCore`; the Guard binds identity, asks the learner, feeds the
resulting events to its sinks, starts one task per ``dispatch`` event and
reports each task's end back to the core. It guarantees one terminal event
per admitted request whatever happens around it:

* the backend completes → ``complete``; raises or times out → ``fail`` (the
  exception's text as reason), the slot freed either way;
* the client cancels its ``submit`` → ``fail("cancelled")``: a queued request
  leaves the queue, a running one has its task cancelled and its slot freed;
* shutdown drains (waits for every live request, up to ``drain_timeout``)
  and then fails what is left with ``fail("shutdown")``;
* a sink that raises (a trace writer on a full disk) changes none of this:
  every event still reaches the other sinks in order and its effects (a
  dispatch started, a caller's outcome set) are applied; then the ``submit``
  of the request the event belongs to raises `SinkError` (carrying the
  outcome), and ``statistics().sink_errors`` counts it. A learner that raises
  or answers garbage is a learner decision (`learners.consult`).

A request the identity layer refuses never reaches the core (no tenant to
put in a trace); its outcome is ``rejected`` with the binding's reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..clock import Clock, MonotonicClock
from ..contract import Contract
from ..errors import EnforcementError, SinkError
from ..events import Complete, Dispatch, Drop, Event, Fail, Reject
from ..verdict import Violation
from .core import DecisionCore, DispatchPolicy
from .dispatch import Dispatcher, Response
from .identity import Identity, IdentityBinder
from .learners import AdmitAll, Learner, LoadView, consult
from .request import Request
from .watch import WatchConfig

__all__ = ["Guard", "GuardStatistics", "JsonlSink", "MonitorSink", "Outcome", "Sink"]

Sink = Callable[[Event], object]
Status = Literal["completed", "rejected", "dropped", "failed"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a submitted request ended."""

    rid: str
    status: Status
    reason: str = ""
    response: Response | None = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class GuardStatistics:
    """The Guard's own counters next to the core's (``uncertain`` is the core's, repeated here)."""

    submitted: int
    unauthenticated_rejects: int
    live: int
    tasks: int
    in_flight: int
    queue_depth: int
    sink_errors: int
    uncertain: int


class JsonlSink:
    """Writes each event as one JSON object a line (uses `rvguard.io.jsonl.JsonlWriter`)."""

    def __init__(self, path: str | Path) -> None:
        from ..io.jsonl import JsonlWriter

        self._writer = JsonlWriter(path)

    def __call__(self, event: Event) -> None:
        """Append ``event``."""
        self._writer.write(event)

    def close(self) -> None:
        """Flush and close the file."""
        self._writer.close()


class MonitorSink:
    """Feeds an online `rvguard.monitors.Monitor`; calls ``on_violation`` for each violation."""

    def __init__(self, monitor: Any, *, on_violation: Callable[[Violation], object] | None = None) -> None:
        self.monitor = monitor
        self._on_violation = on_violation

    def __call__(self, event: Event) -> None:
        """Feed ``event``; report what it revealed."""
        for v in self.monitor.feed(event):
            if self._on_violation is not None:
                self._on_violation(v)


def _status(ev: Reject | Complete | Drop | Fail) -> Status:
    if isinstance(ev, Complete):
        return "completed"
    if isinstance(ev, Reject):
        return "rejected"
    return "dropped" if isinstance(ev, Drop) else "failed"


class Guard:
    """``async with Guard(contract, dispatcher, ...) as guard: await guard.submit(request, identity)``.

    Args:
        contract: the contract to enforce.
        dispatcher: the backend edge.
        learner: the untrusted proposer (default `AdmitAll`).
        sinks: callables taking each event; those with ``close()`` are closed on exit.
        clock: time source (default `MonotonicClock`).
        binder: identity binding; ``None`` trusts ``request.tenant`` as already bound.
        timeout: seconds a dispatch may take before it is failed (``None``: no limit).
        drain: on exit, wait for live requests (else fail them at once).
        drain_timeout: the longest the drain waits before failing the rest.
        dispatch_policy, deferred_drop, gate_upper, watch: passed to `DecisionCore`.
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
        timeout: float | None = None,
        drain: bool = True,
        drain_timeout: float | None = 30.0,
        dispatch_policy: DispatchPolicy = "priority",
        deferred_drop: bool = False,
        gate_upper: bool = False,
        watch: WatchConfig | None = None,
    ) -> None:
        self.contract = contract
        self.core = DecisionCore(
            contract,
            dispatch_policy=dispatch_policy,
            deferred_drop=deferred_drop,
            gate_upper=gate_upper,
            watch=watch,
        )
        self._dispatcher = dispatcher
        self._learner: Learner = learner if learner is not None else AdmitAll()
        self._sinks = list(sinks)
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._binder = binder
        self._timeout = timeout
        self._drain = drain
        self._drain_timeout = drain_timeout
        self._requests: dict[str, Request] = {}
        self._waiters: dict[str, asyncio.Future[Outcome]] = {}
        self._tasks: dict[str, asyncio.Task[Response]] = {}
        self._responses: dict[str, Response] = {}
        self._errors: dict[str, BaseException] = {}
        self._open = False
        self._submitted = 0
        self._unauth = 0
        self._sink_errors = 0
        self._sink_failures: dict[str, SinkError] = {}  # rid -> the first sink failure on its events

    async def __aenter__(self) -> Guard:
        self._open = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- public API --------------------------------------------------------------
    async def submit(self, request: Request, identity: Identity | None = None) -> Outcome:
        """Run ``request`` through the guard and wait for its outcome.

        Raises:
            EnforcementError: the guard is closed (503), or the core refuses the
                request (unknown tenant, live duplicate rid).
            SinkError: a sink raised on one of this request's events; the request
                was decided and finished regardless (``err.outcome``).
            asyncio.CancelledError: the caller was cancelled (the request is failed first).
        """
        if not self._open:
            raise EnforcementError("the guard is not open (use 'async with')", status_hint=503)
        self._submitted += 1
        now = self._clock.now()
        bound = self._bind(request, identity, now)
        if bound is None:
            self._unauth += 1
            return Outcome(request.rid, "rejected", "unauthenticated")
        request = bound
        view = LoadView(now, self.core.in_flight, self.core.queue_depth, self.contract.slots)
        proposal = consult(self._learner, request, view)  # a learner failure is a learner decision
        events = self.core.arrive(request, proposal, now)  # raises before any state change
        fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiters[request.rid] = fut
        self._requests[request.rid] = request
        self._handle(events)
        try:
            return await fut  # raises SinkError if a sink failed on this request's events
        except asyncio.CancelledError:
            self._cancel(request.rid, "cancelled")
            raise

    async def aclose(self) -> None:
        """Stop accepting; drain (or not), fail what is left, close closable sinks."""
        if not self._open:
            return
        self._open = False
        pending = [f for f in self._waiters.values() if not f.done()]
        if self._drain and pending:
            await asyncio.wait(pending, timeout=self._drain_timeout)
        now = self._clock.now()
        self._handle(self.core.fail_queued(now, "shutdown"))
        for rid in list(self._tasks):
            self._cancel(rid, "shutdown")
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
        """Counters now: submitted, identity rejects, live requests, tasks, slots, queue, sink
        failures, and dispatches the U-gate found uncertain (``gate_upper``; the core's count)."""
        return GuardStatistics(
            submitted=self._submitted,
            unauthenticated_rejects=self._unauth,
            live=len(self._waiters),
            tasks=len(self._tasks),
            in_flight=self.core.in_flight,
            queue_depth=self.core.queue_depth,
            sink_errors=self._sink_errors,
            uncertain=self.core.statistics().uncertain,
        )

    # -- internals ---------------------------------------------------------------
    def _bind(self, request: Request, identity: Identity | None, now: float) -> Request | None:
        tenant = request.tenant if self._binder is None else self._binder.bind(identity).tenant
        if tenant is None:
            return None
        capped = request.max_tokens  # an unknown tenant is refused by the core (403)
        if tenant in self.contract.tenants:
            capped = self.core.facts(tenant, request.prompt_tokens, request.max_tokens).capped_tokens
        if tenant == request.tenant and request.t == now and request.max_tokens == capped:
            return request
        return request.rebound(tenant=tenant, t=now, max_tokens=capped)

    def _handle(self, events: list[Event]) -> None:
        """Feed ``events`` to every sink in order, then apply them; a sink failure skips nothing."""
        for ev in events:
            for sink in self._sinks:
                try:
                    sink(ev)
                except Exception as exc:  # noqa: BLE001 - raised to the request's caller by submit
                    self._sink_failed(sink, ev, exc)
        for ev in events:
            if isinstance(ev, Dispatch):
                self._start(ev.rid)
            elif isinstance(ev, Reject | Complete | Drop | Fail):
                self._resolve(ev)

    def _sink_failed(self, sink: Sink, ev: Event, exc: Exception) -> None:
        self._sink_errors += 1
        if ev.rid in self._sink_failures:
            return  # the first failure is the one reported
        kind = ev.kind.value
        err = SinkError(
            f"sink {sink!r} failed on {kind} of {ev.rid!r}: {type(exc).__name__}: {exc}", event=ev
        )
        err.__cause__ = exc
        self._sink_failures[ev.rid] = err

    def _start(self, rid: str) -> None:
        request = self._requests[rid]  # bound in submit: tenant, arrival time and capped tokens
        task = asyncio.get_running_loop().create_task(self._call(request), name=f"rvguard-dispatch-{rid}")
        self._tasks[rid] = task
        task.add_done_callback(lambda t, rid=rid: self._done(rid, t))  # type: ignore[misc]

    async def _call(self, request: Request) -> Response:
        if self._timeout is None:
            return await self._dispatcher.dispatch(request)
        async with asyncio.timeout(self._timeout):
            return await self._dispatcher.dispatch(request)

    def _done(self, rid: str, task: asyncio.Task[Response]) -> None:
        """A dispatch task ended: report it to the core unless someone already failed it."""
        if self._tasks.get(rid) is task:
            del self._tasks[rid]
        if task.cancelled() or not self.core.is_live(rid):
            return
        now = self._clock.now()
        exc = task.exception()
        if exc is None:
            self._responses[rid] = task.result()
            self._handle(self.core.finish(rid, now))
        else:
            self._errors[rid] = exc
            reason = "timeout" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            self._handle(self.core.finish(rid, now, failed=True, reason=reason))

    def _cancel(self, rid: str, reason: str) -> None:
        task = self._tasks.pop(rid, None)
        if task is not None:
            task.cancel()
        if self.core.is_live(rid):
            self._handle(self.core.cancel(rid, self._clock.now(), reason))

    def _resolve(self, ev: Reject | Complete | Drop | Fail) -> None:
        fut = self._waiters.pop(ev.rid, None)
        self._requests.pop(ev.rid, None)
        response = self._responses.pop(ev.rid, None)
        error = self._errors.pop(ev.rid, None)
        failure = self._sink_failures.pop(ev.rid, None)  # counted in statistics either way
        reason = "" if isinstance(ev, Complete) else ev.reason
        outcome = Outcome(ev.rid, _status(ev), reason, response, error)
        if fut is None or fut.done():
            return
        if failure is None:
            fut.set_result(outcome)
        else:
            failure.outcome = outcome
            fut.set_exception(failure)
