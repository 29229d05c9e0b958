"""The shield compiled from property tables: stepped before every controllable event is emitted.

Theory of operation
-------------------
The shield holds the product state of its tables (`rvguard.properties.engine`)
and sees every event of the run, in order, through `Shield.decide`:

* an **uncontrollable** event (arrive, complete, fail, sample) happened: it
  is committed as the monitor does, and a table it drives into bad is a
  violation (`Shield.violations`), never a silent one;
* a **controllable** event (`rvguard.properties.table.CONTROLLABLE`, or an
  edge marked so) that reaches no bad location passes unchanged (the
  shield is transparent) and is committed;
* one that would reach bad is not emitted: the first such edge's remedy
  is applied instead — ``suppress``/``delay`` emit nothing (the state is
  unchanged; the caller keeps the request, and a delayed one is retried
  when an input changes), ``replace: kind`` emits that event instead if it
  is itself compliant (re-checked; otherwise nothing), ``insert: kind``
  emits that event first, then the original if it is now compliant. So
  nothing that reaches bad is ever emitted (soundness by construction).

Tables declared ``monitor_only`` are stepped but never remedied: their bad
is reachable by events the guard does not decide.

In **shadow** mode (``shadow=True``) the shield decides the same way but
commits the event as it was emitted: the caller (the Guard beside its
core) records a decision other than ``pass`` as an alert. The choice among
compliant moves (ranking, whom to drop or evict) is the caller's policy.

Cost: one plan (O(edges tried)) per event, two for a replaced one. This module is pure.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass

from ..contract import Contract
from ..errors import TraceFormatError
from ..events import Event, event_from_dict
from ..verdict import Violation
from .bound import BoundEdge, BoundTable
from .engine import Plan, Product
from .monitor import violation
from .table import PropertyTable, Remedy, RemedyAction

__all__ = ["Decision", "Shield"]

PASS = "pass"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the shield lets out for one event.

    Attributes:
        action: ``pass`` (unchanged), ``suppress``, ``delay``, ``replace`` or ``insert``.
        events: the events to emit, in order (empty: none).
        property: the table whose bad location the event would reach (empty when it passes).
        edge: that edge as written, with its guard.
    """

    action: str
    events: tuple[Event, ...]
    property: str = ""
    edge: str = ""

    @builtins.property
    def passed(self) -> bool:
        """The event goes out unchanged."""
        return self.action == PASS


class Shield:
    """The product of property tables, stepped before each controllable event (module docstring).

    Args:
        contract: the contract (facts, window, slots).
        tables: the tables to enforce (WF's lifecycle is added when absent, unless ``lifecycle`` is
            false: the caller's events are legal by construction, as the decision core's are).
        retain: finished requests remembered for the lifecycle (None: all).
    """

    def __init__(
        self,
        contract: Contract,
        tables: Sequence[PropertyTable],
        *,
        retain: int | None = 100_000,
        lifecycle: bool = True,
    ) -> None:
        from .builtin import WF

        protocol = [] if not lifecycle or any(t.protocol for t in tables) else [WF]
        self.product = Product(contract, [*protocol, *tables], retain=retain)
        self.violations: list[Violation] = []

    def decide(self, ev: Event, *, shadow: bool = False) -> Decision:
        """The shield's decision on ``ev`` (committed unless remedied; in shadow always committed).

        Raises:
            TraceOrderError: ``ev.t`` is before the previous event's.
            UnknownTenantError: an arrival names a tenant the contract lacks.
        """
        if self.passes(ev):  # the common case: nothing goes bad
            return Decision(PASS, (ev,))
        plan = self.product.plan(ev)
        assert plan is not None  # `passes` planned it and found a bad edge
        chosen = plan[2]
        blocked = self._blocking(chosen)
        if blocked is None:
            self._commit(plan)
            return Decision(PASS, (ev,))
        b, be = blocked
        decision = self._remedy(ev, b, be, commit=not shadow)
        if shadow:
            self._commit(plan)
        return decision

    def passes(self, ev: Event) -> bool:
        """`decide`'s fast path: commit ``ev`` and say True when it reaches no table's bad location;
        else False, and nothing changed (the caller decides or enforces it).

        Raises:
            TraceOrderError, UnknownTenantError: as `decide`.
        """
        return self.product.step(ev)

    def enforce(self, ev: Event) -> Decision:
        """Live enforcement, one plan per event: a compliant ``ev`` is committed and passes; one that
        would reach bad is committed nowhere and the decision names the table, edge and remedy (the
        caller applies it: `rvguard.enforce.gate`).

        Raises:
            TraceOrderError, UnknownTenantError: as `decide`.
        """
        if self.passes(ev):
            return Decision(PASS, (ev,))
        plan = self.product.plan(ev)
        assert plan is not None  # `passes` planned it and found a bad edge
        blocked = self._blocking(plan[2])
        if blocked is None:
            self._commit(plan)
            return Decision(PASS, (ev,))
        b, be = blocked
        remedy = be.edge.remedy or Remedy(RemedyAction.SUPPRESS)
        return Decision(remedy.action.value, (), b.name, str(be.edge))

    def _blocking(self, chosen: list[BoundEdge | None]) -> tuple[BoundTable, BoundEdge] | None:
        """The first enforced table whose bad this event's controllable edge reaches."""
        for b, be in zip(self.product.tables, chosen, strict=True):
            if be is not None and be.bad and be.edge.is_controllable() and not b.table.monitor_only:
                return b, be
        return None

    def _commit(self, plan: Plan) -> None:
        """Commit as the monitor does: bad edges are violations; a protocol refusal changes nothing."""
        product = self.product
        inst, ctx, chosen = plan
        ev = ctx.ev
        bad = [(product.tables[i], be) for i, be in enumerate(chosen) if be is not None and be.bad]
        if product.refused(chosen):
            self.violations += [violation(b, be, inst, ev, (*inst.events, ev)) for b, be in bad if b.protocol]
            return
        product.commit(plan)
        self.violations += [violation(b, be, inst, ev, tuple(inst.events)) for b, be in bad]

    def _remedy(self, ev: Event, b: BoundTable, be: BoundEdge, *, commit: bool) -> Decision:
        remedy = be.edge.remedy or Remedy(RemedyAction.SUPPRESS)
        why = {"property": b.name, "edge": str(be.edge)}
        if remedy.action in (RemedyAction.SUPPRESS, RemedyAction.DELAY) or remedy.kind is None:
            return Decision(remedy.action.value, (), **why)
        other = _event(remedy, ev)
        if other is None:
            return Decision(RemedyAction.SUPPRESS.value, (), **why)
        plan = self.product.plan(other)
        if plan is None or self._blocking(plan[2]) is not None or self.product.refused(plan[2]):
            return Decision(RemedyAction.SUPPRESS.value, (), **why)
        out = (other,) if remedy.action is RemedyAction.REPLACE else (other, ev)
        if not commit:
            return Decision(remedy.action.value, out, **why)
        self._commit(plan)
        if remedy.action is RemedyAction.REPLACE:
            return Decision(remedy.action.value, (other,), **why)
        again = self.product.plan(ev)
        if again is None or self._blocking(again[2]) is not None:
            return Decision(remedy.action.value, (other,), **why)
        self._commit(again)
        return Decision(remedy.action.value, (other, ev), **why)


def _event(remedy: Remedy, ev: Event) -> Event | None:
    """The event a replace/insert remedy names, at the same time for the same request."""
    assert remedy.kind is not None
    record: dict[str, object] = {"kind": remedy.kind.value, "t": ev.t, "rid": ev.rid}
    if remedy.basis is not None:
        record["basis"] = remedy.basis
    if remedy.kind.value in ("reject", "drop", "fail"):
        record["reason"] = "shield"
    try:
        return event_from_dict(record)
    except TraceFormatError:
        return None  # a kind whose record needs fields the remedy cannot know: suppressed instead
