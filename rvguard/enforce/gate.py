"""The live gate: a user's property tables enforced before the core's event leaves (DESIGN §11).

Theory of operation
-------------------
``GuardConfig(properties=[...])`` sets a `Gate` on its `DecisionCore` (``shadow=True`` runs the same
tables in shadow instead: `rvguard.enforce.shadow`). The core asks the gate wherever it decides
an event a user's table can forbid, before it applies the event:

* **an admission** (`Gate.admission`): an admit that would reach a table's bad location is not
  emitted; whatever the table's remedy (``suppress``, ``delay``, ``replace: kind``, ``insert:
  kind``) the request is **refused**: a ``reject`` with reason ``property: NAME`` (the Guard holds
  no undecided request, so a delayed or suppressed admission is a refusal, and an inserted event is
  not invented for the request). The gateway answers it 429 with its retry headers.
* **a dispatch** (`Gate.dispatch`): one that would reach bad stays queued, whatever the remedy
  (delay); the core offers it again at its next fill (an arrival, an end, a cancel, telemetry), never
  on a timer, so a table whose guard waits only for time needs some later input.
* **a demotion, a restore, an eviction** (`Gate.allow`): one that would reach bad is kept back,
  whatever the remedy: a demotion leaves the request queued (no surplus is dispatched while the
  redline fires, so the node is no worse off; the next fresh sample that fires tries again), a
  restore leaves it held (tried again at the next fresh sample or rationed fill; the hold bound
  still ends it), a voluntary eviction leaves it running (`rvguard.enforce.relief`).

The re-check is the shield's: the refusal (or nothing) is what is stepped instead, so nothing that
reaches a user table's bad location leaves through these doors.

**Built-in guarantees come first.** A floor admission (an entitled request: AF), a floor dispatch
(SF) and an emergency eviction past the hard floor (EV: the node's relief) are never refused nor
delayed by a user's table; when a table would, the event goes out and the conflict is an ``alert``
record with condition ``shield`` in the trace (and an `Alert` to the watch's hook, and the log,
both when the Guard takes the records: the core does no I/O). The record names the table
(``property``), the request, the event and the guarantee that went first (``first``: ``AF``,
``SF`` or ``EV``), so ``rvguard check --property FILE`` reports that break as declared, apart from
violations (exit 3), and a break with no such record as a violation. Z3's "no conflict"
obligation (``rvguard verify --properties``) names the same pairs beforehand (COOLDOWN against
AF's floor admission, for one). The core's other acts — a doomed drop (DR), a preemption, a reject,
an end of a held request — are not the gate's: they are stepped as they happen, and a table they
break is a ``shield`` alert. So is an uncontrollable event (an end) that breaks a table: such a
table is monitored, not enforced, as its Z3 enforceability obligation says.

The gate sees every event once and in order: the core hands it the events of the call so far
(``pending``) before each question, and the Guard's `observe` of the whole list skips those.

Cost: one shield plan per event (`rvguard.properties.shield.Shield.passes`), a second where a table
goes bad. The gate does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Protocol

from ..contract import Contract
from ..events import Admit, Basis, Dispatch, Event, Reject
from ..lifecycle import DISPATCH
from ..properties.table import PropertyTable
from .shadow import ShieldHook
from .watch import WatchConfig

__all__ = ["AF", "EV", "FIRST_WHY", "PROPERTY_REASON", "SF", "EventGate", "Gate", "tables_hook"]

#: the reject reason's prefix when a user's table refused the admission (``property: COOLDOWN``)
PROPERTY_REASON = "property: "
#: the built-in guarantees that go first, as the ``first`` field of a ``shield`` alert record names them
AF, SF, EV = "AF", "SF", "EV"
FIRST_WHY = {
    AF: "the floor admission (AF)",
    SF: "a floor dispatch (SF)",
    EV: "an emergency eviction past the hard floor (EV)",
}


class _Core(Protocol):
    contract: Contract
    gate: EventGate | None


def tables_hook(
    core: _Core, tables: Sequence[PropertyTable], watch: WatchConfig | None, *, shadow: bool = False
) -> ShieldHook | None:
    """The Guard's hook for a user's tables: a `Gate` set on ``core`` (enforced), a `ShieldHook`
    in shadow (the core decides alone), or ``None`` without tables (nothing paid per event)."""
    if not tables:
        return None
    if shadow:
        return ShieldHook(core.contract, tables, watch)
    gate = core.gate = Gate(core.contract, tables, watch)
    return gate


class EventGate(Protocol):
    """What the core asks before it applies an admission or a dispatch."""

    def admission(self, pending: Sequence[Event], decision: Admit | Reject, entitled: bool) -> Admit | Reject:
        """The decision to apply (the core's, or a refusal)."""
        ...

    def dispatch(self, pending: Sequence[Event], ev: Dispatch, floor: bool) -> bool:
        """Whether the dispatch may go now (else it stays queued)."""
        ...

    def allow(self, pending: Sequence[Event], ev: Event, first: str = "") -> bool:
        """Whether a demote, restore or evict may go now (``first``: the built-in guarantee that
        requires it, which goes out whatever the tables say)."""
        ...


class Gate(ShieldHook):
    """A user's tables enforced live (see the module docstring).

    Attributes:
        refused: admissions refused by a table.
        delayed: dispatches kept queued by a table (each offer counted).
        withheld: demotions, restores and (voluntary) evictions a table kept back (each try counted).
    """

    def __init__(
        self, contract: Contract, tables: Sequence[PropertyTable], watch: WatchConfig | None = None
    ) -> None:
        super().__init__(contract, tables, watch)
        self.refused = 0
        self.delayed = 0
        self.withheld = 0
        self._ahead: list[Event] = []  # stepped at the core's question, before the Guard's observe
        self._ids: set[int] = set()  # their ids (the list keeps them alive, so the ids stay theirs)

    def admission(self, pending: Sequence[Event], decision: Admit | Reject, entitled: bool) -> Admit | Reject:
        """The core's decision, or a refusal naming the table when an admit would reach its bad."""
        self._see(pending)
        if not isinstance(decision, Admit):
            self._step(decision)
        elif entitled or decision.basis is Basis.FLOOR:
            self._step(decision, f"{FIRST_WHY[AF]} comes first", AF)
        elif not self.shield.passes(decision):
            d = self.shield.enforce(decision)
            if not d.passed:
                self.refused += 1
                why = MappingProxyType({"shield": d.edge})
                decision = Reject(decision.t, decision.rid, PROPERTY_REASON + d.property, why)
                self._step(decision)
            self._report()
        self._ahead.append(decision)
        self._ids.add(id(decision))
        return decision

    def dispatch(self, pending: Sequence[Event], ev: Dispatch, floor: bool) -> bool:
        """True when ``ev`` may go now; a floor dispatch always goes (a conflict is an alert)."""
        if self.allow(pending, ev, SF if floor else ""):
            return True
        self.delayed += 1
        return False

    def allow(self, pending: Sequence[Event], ev: Event, first: str = "") -> bool:
        """True when ``ev`` (a dispatch, demote, restore or evict) may go now: a table that would
        reach bad keeps it back, whatever its remedy (the core leaves the request where it was);
        what a built-in guarantee requires (``first``: `SF`, `EV`) goes, a conflict is an alert."""
        self._see(pending)
        if first:
            self._step(ev, f"{FIRST_WHY[first]} comes first", first)
        elif not self.shield.passes(ev):
            d = self.shield.enforce(ev)
            self._report()
            if not d.passed:
                if ev.code != DISPATCH:
                    self.withheld += 1
                return False
        self._ahead.append(ev)
        self._ids.add(id(ev))
        return True

    def observe(self, events: Iterable[Event]) -> None:
        """Step the events the gate has not seen yet (ends, drops, evictions, alerts), in order."""
        ids, passes = self._ids, self.shield.passes
        for ev in events:
            if id(ev) not in ids and not passes(ev):
                self._disagree(ev, "the built-in decision stands")
        self._ahead.clear()  # every event the core asked about is in the list it returned
        ids.clear()

    def _see(self, pending: Sequence[Event]) -> None:
        for ev in pending:
            if id(ev) not in self._ids:
                self._step(ev, "the built-in decision stands")
                self._ahead.append(ev)
                self._ids.add(id(ev))
