"""The discrete-event core: a heap of (time, priority, seq, event), one random source.

Why this shape (simpy's ``schedule()``; STYLE rule 12): two events at the
same instant are ordered by ``priority`` (completions before arrivals, so a
slot freed at t is free for an arrival at t) and then by ``seq`` — the order
they were scheduled — never by object identity, so a run is a function of
its seed alone. All randomness (service noise, learner coin flips) comes
from the `random.Random` the caller injects; the arrivals are generated up
front by `rvguard.sim.workloads` from the same kind of source.

The simulator drives a *policy* — the real `rvguard.enforce.DecisionCore`,
or one of the baselines in `rvguard.sim.baselines` — through the same calls
the live Guard makes: ``arrive(request, proposal, now)`` and
``finish(rid, now)``. Every event they return goes into the trace; each
``dispatch`` starts the request on the `Backend`; the backend says when its
next request may end, and the simulator keeps one wake-up for that on the
heap (a later dispatch can move it: continuous batching slows the batch, so
a stale wake-up carries an old version and is skipped).

Cost: O(log h) per heap operation for h pending events, plus the policy's
and the backend's own costs; memory O(requests) for the trace.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .. import progress
from ..enforce.learners import Learner, LoadView, consult
from ..enforce.request import Request
from ..events import Arrive, Event, Proposal, Watch
from ..lifecycle import ARRIVE, DISPATCH
from .backend import ServiceModel

__all__ = ["ARRIVAL", "COMPLETION", "Policy", "SimResult", "Simulator"]

COMPLETION, ARRIVAL = 0, 1  # heap priorities: completions first at equal times


class Policy(Protocol):
    """What the simulator drives: `DecisionCore` and the baselines satisfy it."""

    @property
    def in_flight(self) -> int:
        """Requests holding a slot."""
        ...

    @property
    def queue_depth(self) -> int:
        """Admitted requests waiting for a slot."""
        ...

    def arrive(self, request: Request, proposal: Proposal, now: float) -> list[Event]:
        """Decide on an arrival; return its events."""
        ...

    def finish(self, rid: str, now: float, *, failed: bool = False, reason: str = "") -> list[Event]:
        """A dispatched request ended; return its events and any dispatches it allows."""
        ...


@dataclass(frozen=True, slots=True)
class SimResult:
    """One simulated run.

    Attributes:
        events: the trace, in time order (DESIGN §2 schema).
        end_time: the time of the last event.
        requests: arrivals offered.
    """

    events: tuple[Event, ...]
    end_time: float
    requests: int


class Simulator:
    """Runs one policy, one learner and one backend over a list of arrivals.

    Args:
        policy: the dispatcher under test (fresh per run).
        learner: the untrusted proposer.
        model: the backend's service model.
        rng: the one random source of the run (backend noise; pass the same
            object to a `RandomLearner` so that it is the only source).
        slots: C as the learner sees it.
        shield: a user's tables beside the core (`rvguard.enforce.gate.tables_hook`: enforced
            through the core's gate, or in shadow): each step's events pass through it, followed
            by its ``shield`` alert records, as in the Guard.
    """

    def __init__(
        self,
        policy: Policy,
        learner: Learner,
        model: ServiceModel,
        rng: random.Random,
        *,
        slots: int,
        shield: Callable[[list[Event]], list[Event]] | None = None,
    ) -> None:
        self._policy = policy
        self._shield = shield
        #: the core's assumption watch (its alerts join the trace after each step); baselines have none
        self._alerts: Callable[[], list[Watch]] | None = getattr(policy, "drain_alerts", None)
        self._learner = learner
        self._backend = model.backend(rng)
        self._slots = slots
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = itertools.count()
        self._sizes: dict[str, tuple[int, int | None]] = {}
        self._trace: list[Event] = []
        self._wake = 0  # version of the one live wake-up on the heap
        self._wake_t: float | None = None  # and its time

    def _schedule(self, t: float, priority: int, event: object) -> None:
        heapq.heappush(self._heap, (t, priority, next(self._seq), event))

    def run(self, arrivals: Iterable[Request]) -> SimResult:
        """Simulate until every arrival has been decided and every admitted request has ended."""
        n, last = 0, 0.0
        for req in arrivals:
            self._schedule(req.t, ARRIVAL, req)
            n, last = n + 1, max(last, req.t)
        end = shown = 0.0
        steps = 0
        with progress.task("simulating", total=last, unit="s") as advance:  # in simulated seconds
            while self._heap:
                now, priority, _, event = heapq.heappop(self._heap)
                if priority == ARRIVAL:
                    assert isinstance(event, Request)
                    self._on_arrival(event, now)
                elif event == self._wake:
                    self._wake_t = None
                    self._on_wake(now)
                else:
                    continue  # a wake-up a later dispatch superseded
                end = now
                self._rearm(now)
                steps += 1
                if not steps & 0x3FF:  # every 1024 events, cheap in the hot loop
                    advance(min(now, last) - shown)
                    shown = min(now, last)
        return SimResult(tuple(self._trace), end, n)

    def _rearm(self, now: float) -> None:
        """Keep one wake-up, at the backend's next completion time (unchanged: keep the live one)."""
        t = self._backend.next_time()
        t = None if t is None else max(t, now)
        if t == self._wake_t:
            return
        self._wake += 1
        self._wake_t = t
        if t is not None:
            self._schedule(t, COMPLETION, self._wake)

    def _on_arrival(self, req: Request, now: float) -> None:
        p = self._policy
        view = LoadView(now=now, in_flight=p.in_flight, queue_depth=p.queue_depth, slots=self._slots)
        proposal = consult(self._learner, req, view)  # a raising learner rejects only the surplus
        self._emit(p.arrive(req, proposal, now), now)

    def _on_wake(self, now: float) -> None:
        for rid in self._backend.advance(now):
            self._sizes.pop(rid, None)
            self._emit(self._policy.finish(rid, now), now)

    def _emit(self, events: Sequence[Event], now: float) -> None:
        """Trace the policy's events; an arrival's sizes are kept for its dispatch, which starts it.

        Dispatches on the kind's integer code (`rvguard.lifecycle`), not an ``isinstance`` chain.
        """
        append = self._trace.append
        if self._alerts is not None and (alerts := self._alerts()):
            events = [*events, *alerts]
        if self._shield is not None:
            events = self._shield(list(events))
        for ev in events:
            append(ev)
            code = ev.code
            if code == ARRIVE:
                arrive: Arrive = ev  # type: ignore[assignment]
                self._sizes[ev.rid] = (arrive.max_tokens or 1, arrive.prompt_tokens)
            elif code == DISPATCH:
                tokens, prompt = self._sizes.get(ev.rid, (1, None))
                self._backend.start(ev.rid, tokens, prompt, now)
