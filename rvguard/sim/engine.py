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
``dispatch`` starts the request on the `Backend`, whose completion comes
back as a heap event.

Cost: O(log h) per heap operation for h pending events, plus the policy's
and the backend's own costs; memory O(requests) for the trace.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .. import progress
from ..enforce.learners import Learner, LoadView, consult
from ..enforce.request import Request
from ..events import Arrive, Dispatch, Event, Proposal
from .backend import Backend, ServiceModel

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
    """

    def __init__(
        self,
        policy: Policy,
        learner: Learner,
        model: ServiceModel,
        rng: random.Random,
        *,
        slots: int,
    ) -> None:
        self._policy = policy
        self._learner = learner
        self._backend = Backend(model, rng)
        self._slots = slots
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = itertools.count()
        self._tokens: dict[str, int] = {}
        self._trace: list[Event] = []

    def _schedule(self, t: float, priority: int, event: object) -> None:
        heapq.heappush(self._heap, (t, priority, next(self._seq), event))

    def run(self, arrivals: Iterable[Request]) -> SimResult:
        """Simulate until every arrival has been decided and every admitted request has ended."""
        n, last = 0, 0.0
        for req in arrivals:
            self._schedule(req.t, ARRIVAL, req)
            n, last = n + 1, max(last, req.t)
        now = shown = 0.0
        steps = 0
        with progress.task("simulating", total=last, unit="s") as advance:  # in simulated seconds
            while self._heap:
                now, priority, _, event = heapq.heappop(self._heap)
                if priority == ARRIVAL:
                    assert isinstance(event, Request)
                    self._on_arrival(event, now)
                else:
                    assert isinstance(event, tuple)
                    self._on_completion(event[0], event[1], now)
                steps += 1
                if not steps & 0x3FF:  # every 1024 events, cheap in the hot loop
                    advance(min(now, last) - shown)
                    shown = min(now, last)
        return SimResult(tuple(self._trace), now, n)

    def _on_arrival(self, req: Request, now: float) -> None:
        p = self._policy
        view = LoadView(now=now, in_flight=p.in_flight, queue_depth=p.queue_depth, slots=self._slots)
        proposal = consult(self._learner, req, view)  # a raising learner rejects only the surplus
        self._emit(p.arrive(req, proposal, now), now)

    def _on_completion(self, rid: str, version: int, now: float) -> None:
        if not self._backend.current(rid, version):
            return  # superseded by a stall
        self._backend.end(rid)
        self._tokens.pop(rid, None)
        self._emit(self._policy.finish(rid, now), now)

    def _emit(self, events: Sequence[Event], now: float) -> None:
        for ev in events:
            self._trace.append(ev)
            if isinstance(ev, Arrive):
                self._tokens[ev.rid] = ev.max_tokens or 1
            elif isinstance(ev, Dispatch):
                tokens = self._tokens.get(ev.rid, 1)
                for rid, t_end, version in self._backend.start(ev.rid, tokens, now):
                    self._schedule(t_end, COMPLETION, (rid, version))
