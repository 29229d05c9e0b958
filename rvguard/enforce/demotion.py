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

from ..contract import Contract
from ..errors import EnforcementError
from ..events import HOLD_BOUND, Demote, Event, Fail, Restore, Sample
from ..facts import RequestFacts
from ..lifecycle import Stage
from .gate import EventGate
from .rationing import ReliefConfig, restore_allowance
from .ready import Key, ReadyQueue
from .redline import HardFloorCrossing, HeadroomSample, Redline, RedlineReading
from .request import Request

__all__ = ["REDLINE_STALE", "DemotionMixin", "Holdable"]

#: the ``fail`` reason of surplus the redline held past its hold limit on a sample too old
REDLINE_STALE = "redline-stale"


class Holdable(Protocol):
    """What the mixin reads of a core entry."""

    request: Request
    key: Key
    facts: RequestFacts
    state: Stage
    entitled: bool


class _Core(Protocol):
    """The core as the mixin sees it (the mixin's methods take ``self: _Core``)."""

    _redline: Redline | None
    _reading: RedlineReading | None
    _staleness: float
    _restore_waits: bool
    _ration: ReliefConfig | None
    _held_at: dict[str, float]
    _ration_cap: int
    _restoring: dict[str, Any]  # rid -> the core's entry
    _surplus_running: int
    _ready: ReadyQueue[Any]
    gate: EventGate | None
    _running: int
    contract: Contract

    @property
    def _held(self) -> Mapping[str, Holdable]: ...

    @property
    def _live(self) -> Mapping[str, Holdable]: ...

    def _holding(self) -> bool: ...

    def _allowance(self, held: Sequence[Holdable], growth: int | None) -> int: ...

    def _unheld(self, entry: Holdable) -> None: ...

    def _restored_waiting(self) -> int: ...

    def _take_surplus(self) -> Sequence[Holdable]: ...

    def _check_time(self, now: float) -> None: ...

    def _advance(self, now: float) -> None: ...

    def _apply(self, entry: Any, ev: Event) -> None: ...

    def _fill(self, now: float, out: list[Event]) -> None: ...

    def _hold_surplus(self, now: float, out: list[Event]) -> None: ...

    def _restore_held(
        self, now: float, out: list[Event], sample: HeadroomSample, growth: int | None = None
    ) -> None: ...

    def _decided_by(self) -> tuple[str, float]: ...


class DemotionMixin:
    """The redline half of `DecisionCore` (module doc)."""

    _redline: Redline | None
    _reading: RedlineReading | None
    _staleness: float
    _restore_waits: bool
    _ration: ReliefConfig | None
    _held_at: dict[str, float]
    _ration_cap: int
    _restoring: dict[str, Any]  # rid -> the core's entry

    def ration(self: _Core, config: ReliefConfig) -> None:
        """Ration relief from now on (`rvguard.enforce.rationing`): restore held surplus only as the
        headroom allows, keep queued surplus behind the held, and end a request held longer than
        ``config.hold_bound`` (`expire_held`)."""
        self._ration = config

    @property
    def redline(self: _Core) -> Redline | None:
        """The redline (``None``: the core was given no `RedlineConfig`)."""
        return self._redline

    @property
    def held(self: _Core) -> int:
        """Surplus requests the redline holds back now."""
        return len(self._held)

    def observe(self: _Core, sample: HeadroomSample, now: float, *, growth: int | None = None) -> list[Event]:
        """One headroom sample at ``now``: its ``sample`` event if fresh, the demotions or
        restorations it causes, and any dispatch a restoration allows (module doc). ``growth``: the
        tokens running work will still generate, when the runtime knows them (rationed restores
        only; without it each running request counts its whole capped output).

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
            self._restore_held(now, out, sample, growth)
            self._fill(now, out)
        self._restore_waits = bool(self._held) and not reading.firing
        return out

    def hard_floor_crossed(self: _Core) -> HardFloorCrossing | None:
        """The resource below its hard floor, if any (``None`` without a redline)."""
        return None if self._redline is None else self._redline.hard_floor_crossed()

    def _holding(self: _Core) -> bool:
        return self._redline is not None and self._redline.firing

    def _gated(self: _Core) -> bool:
        """No surplus dispatch now: the redline fires, or, rationed, some are still held and surplus
        running has reached what the last restore allowed (the restored go first, by rank; queued
        surplus that came after them waits for a completion or the next allowance). A floor-entitled
        request admitted as excess is never held back by the allowance when it is next in rank."""
        if self._holding():
            return True
        if self._ration is None or not self._held or self._surplus_running < self._ration_cap:
            return False
        head = self._ready.peek_surplus()
        return head is None or not head.entitled  # entitled excess (protected) is never rationed

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
        gate = self.gate
        for entry in taken:
            ev = Demote(now, entry.request.rid, resource, sample_time)
            if gate is not None and not gate.allow(out, ev):  # a user's table keeps it queued (still no
                self._ready.push(entry.key, entry, surplus=True)  # surplus dispatch while the redline fires)
                continue
            self._apply(entry, ev)
            out.append(ev)
            if self._ration is not None:
                self._held_at[entry.request.rid] = now
                self._ration_cap = 0  # nothing more dispatches past the held before a restore

    def _restore_held(
        self: _Core, now: float, out: list[Event], sample: HeadroomSample, growth: int | None = None
    ) -> None:
        """Restore the held requests, in rank order (the redline is clear), citing ``sample``, the
        fresh one that found it clear: all of them, or, rationed, as many as the headroom allows
        (`_allowance`); when that sample is older than ``staleness`` nothing is restored (stale
        telemetry never restores): the held wait for a fresh one."""
        if not self._held or now - sample.t > self._staleness:
            return
        held = sorted(self._held.values(), key=lambda e: e.key)
        if self._ration is not None:
            held = held[: self._allowance(held, growth)]
            self._ration_cap = self._surplus_running + self._restored_waiting() + len(held)
        for entry in held:
            ev = Restore(now, entry.request.rid, sample.resource, sample.t)
            if self.gate is not None and not self.gate.allow(out, ev):
                continue  # a user's table keeps it held: tried again at the next fresh sample
            self._apply(entry, ev)
            out.append(ev)
            self._unheld(entry)

    def _pass_on(self: _Core, now: float, out: list[Event]) -> None:
        """Rationed, with the redline clear: a surplus slot the last allowance granted and that has
        come free (a completion, a preemption) goes to the first held requests, restored now on the
        deciding resource's last fresh sample, before any surplus queued after them; with that
        sample older than ``staleness``, nothing (stale telemetry never restores)."""
        if self._ration is None or not self._held or self._holding() or self._reading is None:
            return
        granted = self._ration_cap - self._surplus_running - self._restored_waiting()
        room = min(granted, self.contract.slots - self._running)
        resource, sample_time = self._decided_by()
        if room <= 0 or now - sample_time > self._staleness:
            return
        for entry in sorted(self._held.values(), key=lambda e: e.key)[:room]:
            ev = Restore(now, entry.request.rid, resource, sample_time)
            if self.gate is not None and not self.gate.allow(out, ev):
                continue  # a user's table keeps it held: tried again at the next fill or sample
            self._apply(entry, ev)
            out.append(ev)
            self._unheld(entry)

    def _unheld(self: _Core, entry: Holdable) -> None:
        """``entry`` was just restored: its hold clock stops; rationed, it waits for a slot counted
        against the allowance (`_restored_waiting`)."""
        rid = entry.request.rid
        self._held_at.pop(rid, None)
        if self._ration is not None:
            self._restoring[rid] = entry

    def _restored_waiting(self: _Core) -> int:
        """Restored requests still queued (each already counted against the allowance)."""
        for rid in [r for r, e in self._restoring.items() if e.state is not Stage.ADMITTED]:
            del self._restoring[rid]  # dispatched, or ended
        return len(self._restoring)

    def _allowance(self: _Core, held: Sequence[Holdable], growth: int | None) -> int:
        """How many of ``held`` (rank order) the deciding resource's room above its ``h_min`` holds,
        each at its largest (prompt plus capped output), less what running work may still grow by
        (``growth``, else each running request's capped output) and what queued work will take."""
        assert self._ration is not None
        assert self._redline is not None
        assert self._reading is not None
        resource = self._reading.resource
        level = next(r.h_min for r in self._redline.config.resources if r.name == resource)
        committed = 0
        for entry in self._live.values():
            if entry.state is Stage.ADMITTED:
                committed += _footprint(entry)
            elif entry.state is Stage.DISPATCHED and growth is None:
                committed += entry.facts.capped_tokens
        sizes = [_footprint(e) for e in held]
        headroom, capacity = self._reading.smoothed, self._ration.capacity
        return restore_allowance(
            sizes, headroom=headroom, level=level, capacity=capacity, committed=committed + (growth or 0)
        )

    def expire_held(self: _Core, now: float) -> list[Event]:
        """Rationed: end each request held ``hold_bound`` seconds or more ``fail`` (reason
        `HOLD_BOUND`, with ``held_since``): its caller gets an answer and a retry signal instead of
        waiting on its own time-out. Only surplus is ever held. The surplus queued behind the held
        then dispatches as slots allow (the last held gone, nothing else may come to wake it)."""
        if self._ration is None or not self._held:
            return []
        self._check_time(now)
        bound = self._ration.hold_bound
        for rid in self._held:  # held before `ration` was called: its bound counts from now
            self._held_at.setdefault(rid, now)
        due = [e for e in self._held.values() if now - self._held_at[e.request.rid] >= bound]
        if not due:
            return []
        self._advance(now)
        out: list[Event] = []
        for entry in sorted(due, key=lambda e: e.key):
            since = self._held_at.pop(entry.request.rid)
            ev = Fail(now, entry.request.rid, HOLD_BOUND, {"held_since": since})
            self._apply(entry, ev)
            out.append(ev)
        for rid in [r for r in self._held_at if r not in self._held]:  # ended while held (cancelled)
            del self._held_at[rid]
        self._fill(now, out)  # surplus queued behind the held goes now: nothing else may come to wake it
        return out


def _footprint(entry: Holdable) -> int:
    """Tokens a request holds at its largest: its prompt and its capped output."""
    return (entry.request.prompt_tokens or 0) + entry.facts.capped_tokens
