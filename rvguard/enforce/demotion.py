"""The redline's action in the decision core: demote (hold back) queued surplus work, restore it.

Theory of operation
-------------------
The core (`rvguard.enforce.core.DecisionCore`) owns one `Redline` when it is given a
`RedlineConfig`. `DemotionMixin.observe` takes one headroom sample at ``now``:

* a sample the redline finds stale or duplicate changes nothing and is not traced;
* a fresh one is traced as a ``sample`` event (its resource, raw value and own timestamp);
* while the redline fires, every queued *surplus* request (admitted on any basis but ``floor``)
  leaves the ready queue with one ``demote`` event naming the deciding resource and the
  timestamp of that resource's last fresh sample (so RL can match each demote to a sample
  already traced); surplus admitted while it fires is demoted at once, before any dispatch;
* when the redline clears, every held request is restored (``restore``) in its rank order and
  keeps its original rank, then dispatch resumes; the restore cites the fresh sample that found the
  redline clear, and only one at most ``staleness`` old at ``now`` restores (stale telemetry never
  restores: the held wait for the next fresh sample while the redline stays clear);
* a demotion cites a sample no older than ``staleness`` (the contract's ``headroom.staleness``):
  when the deciding resource's last fresh sample is older, nothing more is demoted, and surplus
  still waits (no dispatch of surplus while the redline fires) until a fresh sample either
  demotes it or clears the redline — telemetry that stops arriving holds surplus back, never
  floor work, and never makes a demotion cite a stale sample;
* a floor-entitled request admitted as excess (its floor lowered by the watch, or refused by a
  shared credit pool) is never demoted: it stays queued (`DecisionCore.protected`).

Scope, by construction: only requests this core admitted can be in its ready queue, and only
the surplus half of it is ever taken (`ready.ReadyQueue.take_surplus`): floor work, running work
and requests admitted elsewhere are never touched, and nothing is evicted or stopped here (past
the hard floor, the runtime preempts running surplus through `preemption.Preemption`, which
refuses floor work). Every state change goes through the core's table (``HOLD``, ``UNHOLD``,
``ABANDON`` in `rvguard.enforce.transitions`).

Cost: O(resources) per sample, plus O(k log k) for the k requests demoted or restored; memory
O(held requests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..errors import EnforcementError
from ..events import Demote, Event, Fail, Restore, Sample
from .ready import Key
from .redline import HardFloorCrossing, HeadroomSample, Redline, RedlineReading
from .request import Request

__all__ = ["REDLINE_STALE", "DemotionMixin", "Holdable"]

#: the ``fail`` reason of surplus the redline held past its hold limit on a sample too old
REDLINE_STALE = "redline-stale"


class Holdable(Protocol):
    """What the mixin reads of a core entry."""

    request: Request
    key: Key


class _Core(Protocol):
    """The core as the mixin sees it (the mixin's methods take ``self: _Core``)."""

    _redline: Redline | None
    _reading: RedlineReading | None
    _staleness: float
    _restore_waits: bool

    @property
    def _held(self) -> Mapping[str, Holdable]: ...

    def _take_surplus(self) -> Sequence[Holdable]: ...

    def _check_time(self, now: float) -> None: ...

    def _advance(self, now: float) -> None: ...

    def _apply(self, entry: Any, ev: Event) -> None: ...

    def _fill(self, now: float, out: list[Event]) -> None: ...

    def _hold_surplus(self, now: float, out: list[Event]) -> None: ...

    def _restore_held(self, now: float, out: list[Event], sample: HeadroomSample) -> None: ...

    def _decided_by(self) -> tuple[str, float]: ...


class DemotionMixin:
    """The redline half of `DecisionCore` (module doc)."""

    _redline: Redline | None
    _reading: RedlineReading | None
    _staleness: float
    _restore_waits: bool

    @property
    def redline(self: _Core) -> Redline | None:
        """The redline (``None``: the core was given no `RedlineConfig`)."""
        return self._redline

    @property
    def held(self: _Core) -> int:
        """Surplus requests the redline holds back now."""
        return len(self._held)

    def observe(self: _Core, sample: HeadroomSample, now: float) -> list[Event]:
        """One headroom sample at ``now``: its ``sample`` event if fresh, the demotions or
        restorations it causes, and any dispatch a restoration allows (module doc).

        Raises:
            EnforcementError: the core has no redline (500).
            TelemetryFormatError: an unknown resource, a value outside [0, 1], a time not finite.
            TraceOrderError: ``now`` earlier than a previous call's. Nothing changed on a raise.
        """
        if self._redline is None:
            raise EnforcementError("this core has no redline: give it a RedlineConfig", status_hint=500)
        self._check_time(now)
        reading = self._redline.observe(sample)
        if not reading.fresh:
            return []
        self._advance(now)
        self._reading = reading
        out: list[Event] = [Sample(now, sample.resource, sample.value, sample.t)]
        if reading.firing:
            self._hold_surplus(now, out)
        elif reading.toggled or self._held:
            self._restore_held(now, out, sample)
            self._fill(now, out)
        self._restore_waits = bool(self._held) and not reading.firing
        return out

    def hard_floor_crossed(self: _Core) -> HardFloorCrossing | None:
        """The resource below its hard floor, if any (``None`` without a redline)."""
        return None if self._redline is None else self._redline.hard_floor_crossed()

    def _holding(self: _Core) -> bool:
        return self._redline is not None and self._redline.firing

    def _decided_by(self: _Core) -> tuple[str, float]:
        """The deciding resource of the last fresh reading and its last fresh sample's time."""
        assert self._redline is not None
        assert self._reading is not None
        resource = self._reading.resource
        return resource, self._redline.last_sample_time(resource)

    def expire_hold(self: _Core, now: float, hold_limit: float) -> list[Event]:
        """While the redline fires on a deciding sample older than ``hold_limit`` seconds, end
        every held and queued surplus request ``fail`` (reason `REDLINE_STALE`, the deciding
        ``resource`` and its ``sample_time`` on the record): one sample cannot hold surplus for
        ever (its callers get 503 and a retry signal). Floor work is never touched."""
        if self._redline is None or not self._redline.firing or self._reading is None:
            return []
        resource, sample_time = self._decided_by()
        if not now - sample_time > hold_limit:
            return []
        self._check_time(now)
        self._advance(now)
        out: list[Event] = []
        why = {"resource": resource, "sample_time": sample_time}
        for entry in [*sorted(self._held.values(), key=lambda e: e.key), *self._take_surplus()]:
            ev = Fail(now, entry.request.rid, REDLINE_STALE, why)
            self._apply(entry, ev)
            out.append(ev)
        return out

    def _hold_surplus(self: _Core, now: float, out: list[Event]) -> None:
        """Demote every queued surplus request (the redline fires), citing a sample no older than
        ``staleness``; with none that fresh, nothing is demoted (the surplus waits, `_fill`)."""
        resource, sample_time = self._decided_by()
        if now - sample_time > self._staleness:
            return
        taken = self._take_surplus()
        for entry in taken:
            ev = Demote(now, entry.request.rid, resource, sample_time)
            self._apply(entry, ev)
            out.append(ev)

    def _restore_held(self: _Core, now: float, out: list[Event], sample: HeadroomSample) -> None:
        """Restore every held request, in rank order (the redline is clear), citing ``sample``, the
        fresh one that found it clear; when that sample is older than ``staleness`` nothing is
        restored (stale telemetry never restores): the held wait for a fresh one."""
        if not self._held or now - sample.t > self._staleness:
            return
        for entry in sorted(self._held.values(), key=lambda e: e.key):
            ev = Restore(now, entry.request.rid, sample.resource, sample.t)
            self._apply(entry, ev)
            out.append(ev)
