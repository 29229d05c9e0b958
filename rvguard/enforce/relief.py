"""Relief in the decision core: a running surplus request taken off its engine (``evict``).

Theory of operation
-------------------
Past the redline's hard floor, or when keeping a request costs more than moving it, the runtime's
eviction channels (`rvguard.enforce.emergency`, `rvguard.enforce.voluntary`) *choose* whom to
evict: that ranking is policy, kept outside the core. Carrying the choice out is the core's:
`ReliefMixin.evict` takes the ``evict`` edge of the core's table (`rvguard.enforce.transitions`,
``DISPATCHED --evict--> EVICTED``) through ``_apply``, like every other state change, and returns
the event for the sinks. The request keeps its slot until it ends: the runtime then stops it and
the core's ``cancel`` takes ``EVICTED --fail--> DONE`` (reason ``preempted``), freeing the slot.
So the trace and the core's own record say the same thing: running → evicted → done.

PR and EV, by construction: a request that is floor-entitled, or was admitted on the floor, is
never evicted (`DecisionCore.protected`), and only a running request can be.

Pure: the core's table and the event records only.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import EnforcementError
from ..events import Event
from ..lifecycle import Stage
from ..runbook_events import EMERGENCY, Evict
from .demotion import DemotionMixin
from .gate import EV, EventGate

__all__ = ["ReliefMixin"]


class _Entry(Protocol):
    state: Stage


class _Core(Protocol):
    """The core as the mixin sees it (the mixin's methods take ``self: _Core``)."""

    _evicted: int
    gate: EventGate | None

    def protected(self, rid: str) -> bool: ...

    def _entry_of(self, rid: str) -> _Entry | None: ...

    def _check_time(self, now: float) -> None: ...

    def _advance(self, now: float) -> None: ...

    def _apply(self, entry: Any, ev: Event) -> None: ...


class ReliefMixin(DemotionMixin):
    """The relief half of `DecisionCore` (module doc): the redline's demotion, and eviction."""

    _evicted: int

    def evict(self: _Core, rid: str, now: float, state: int, reason: str, **decided: Any) -> list[Event]:
        """Take running ``rid`` off its engine: its ``evict`` event (``decided``: what the channel
        decided on, for EV: ``resource``, ``headroom``, ``target``, ``capacity``). It keeps its
        slot until ``cancel`` ends it. A user's table (the core's gate) may forbid an eviction
        that is not an emergency one: then nothing happens and the list is empty; an emergency
        eviction (the hard floor's relief, EV) goes first, a conflict is a ``shield`` alert.

        Raises:
            EnforcementError: ``rid`` is not running, or is floor work (409); state unchanged.
            TraceOrderError: ``now`` earlier than a previous call's.
        """
        self._check_time(now)
        entry = self._entry_of(rid)
        if entry is None or entry.state is not Stage.DISPATCHED:
            where = "unknown" if entry is None else entry.state.name
            raise EnforcementError(
                f"request {rid!r} is not running ({where}): nothing to evict", status_hint=409
            )
        if self.protected(rid):
            raise EnforcementError(f"request {rid!r} is floor work: never evicted (PR, EV)", status_hint=409)
        self._advance(now)
        ev = Evict(now, rid, state, reason, **decided)
        if self.gate is not None and not self.gate.allow([], ev, EV if reason == EMERGENCY else ""):
            return []  # a user's table forbids this (voluntary) eviction: the request keeps running
        self._apply(entry, ev)
        self._evicted += 1
        return [ev]
