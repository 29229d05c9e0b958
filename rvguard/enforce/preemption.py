"""Bare preemption: a running surplus request gets a grace period, then is stopped; its caller retries.

Theory of operation
-------------------
When the node must shed running work and the work cannot move (or is not
worth moving), the cheapest response is to stop it and let its caller run it
again: Borg's SIGTERM-then-SIGKILL, Kubernetes' graceful termination. Two
steps, pure (time comes in as ``now``):

1. `Preemption.notice` marks a running request for preemption and gives it
   ``grace`` seconds: a request that completes within them was never
   preempted. Only a request in flight that was **not** admitted on the floor
   (basis ``surplus`` or ``demoted``) and is not floor-entitled (an entitled
   request a lowered floor or a shared pool admitted as excess stays
   protected: `DecisionCore.protected`) may be noticed; anything else is refused
   (`EnforcementError`, 409) before any state changes. This is property PR's
   first half, by construction: no assured or floor-entitled request is
   ever preempted.
2. `Preemption.stop` (when the grace has passed; `due` lists those) ends
   the request through the core with one ``fail`` of reason ``preempted``,
   which frees its slot and dispatches the next queued request. A request
   that ended meanwhile is simply forgotten. PR's second half: the core's
   automaton gives each request exactly one terminal event, and that event
   is the preemption's own ``fail``.

Stopping at the engine is the runtime's part: the `Guard` cancels the
dispatch in its caller's coroutine, which closes the upstream stream (vLLM
aborts a sequence whose stream is closed), and hands the caller an outcome
``preempted`` with ``retry_after`` seconds as its retry hint (the gateway:
HTTP 503 with ``Retry-After``, or an SSE error event mid-stream).

Cost: O(1) per notice and stop, O(p log p) for `due` over p pending notices;
memory O(p).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import EnforcementError, SpecError
from ..events import PREEMPTED as PREEMPTED
from ..events import Basis, Event
from .core import DecisionCore

__all__ = ["PREEMPTED", "PREEMPTIBLE", "Notice", "Preemption"]

#: the admission bases a running request may be preempted on (never ``floor``)
PREEMPTIBLE = frozenset({Basis.SURPLUS, Basis.DEMOTED})


@dataclass(frozen=True, slots=True)
class Notice:
    """A running request marked for preemption: stopped at ``stop_at`` unless it ends first;
    ``resource``: the one whose hard floor was crossed, named on the ``fail`` record ("": none)."""

    rid: str
    at: float
    stop_at: float
    resource: str = ""


class Preemption:
    """Notices and stops over one `DecisionCore` (see module doc).

    Args:
        core: the decision core whose running requests are preempted.
        grace: default seconds between a notice and the stop.
        retry_after: the retry hint handed to a preempted caller, in seconds.
    """

    def __init__(self, core: DecisionCore, *, grace: float = 0.0, retry_after: float = 1.0) -> None:
        for name, value in (("grace", grace), ("retry_after", retry_after)):
            if not 0.0 <= value < math.inf:
                raise SpecError(f"{name} must be finite seconds >= 0, got {value!r}", field=name, value=value)
        self.core = core
        self.grace = grace
        self.retry_after = retry_after
        self._notices: dict[str, Notice] = {}
        self.stopped = 0

    def preemptible(self, rid: str) -> bool:
        """True when ``rid`` is in flight, was not admitted on the floor and is not floor-entitled."""
        return self.core.running_basis(rid) in PREEMPTIBLE and not self.core.protected(rid)

    @property
    def noticed(self) -> frozenset[str]:
        """The rids noticed and not stopped or forgotten yet."""
        return frozenset(self._notices)

    @property
    def pending(self) -> tuple[Notice, ...]:
        """Notices given and not stopped or forgotten yet."""
        return tuple(self._notices.values())

    def notice(self, rid: str, now: float, *, grace: float | None = None, resource: str = "") -> Notice:
        """Mark ``rid`` for preemption at ``now + grace``; a second notice keeps the first.

        Raises:
            EnforcementError: ``rid`` is not in flight, or was admitted on the floor (409).
        """
        basis = self.core.running_basis(rid)
        if basis not in PREEMPTIBLE or self.core.protected(rid):
            why = "is not in flight" if basis is None else f"was admitted on the {basis.value}"
            why = "is floor-entitled" if basis is Basis.DEMOTED else why
            raise EnforcementError(f"request {rid!r} cannot be preempted: it {why}", status_hint=409)
        wait = self.grace if grace is None else grace
        if not 0.0 <= wait < math.inf:
            raise EnforcementError(f"grace must be finite seconds >= 0, got {wait!r}", status_hint=400)
        return self._notices.setdefault(rid, Notice(rid, now, now + wait, resource))

    def due(self, now: float) -> list[str]:
        """Noticed requests whose grace has passed by ``now``, in stop order."""
        ready = [n for n in self._notices.values() if n.stop_at <= now]
        return [n.rid for n in sorted(ready, key=lambda n: (n.stop_at, n.rid))]

    def stop(self, rid: str, now: float) -> list[Event]:
        """End noticed ``rid`` with ``fail(preempted)`` (and whatever dispatch that frees);
        ``[]`` when it was not noticed or has ended meanwhile."""
        notice = self._notices.pop(rid, None)
        if notice is None or not self.preemptible(rid):
            return []
        self.stopped += 1
        named = {"resource": notice.resource} if notice.resource else {}
        return self.core.cancel(rid, now, PREEMPTED, **named)

    def forget(self, rid: str) -> None:
        """Drop the notice of a request that ended by itself (a no-op without one)."""
        self._notices.pop(rid, None)
