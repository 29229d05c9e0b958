"""The online monitor compiled from property tables: feed events, read violations.

Every event is planned and committed on the product of the tables
(`rvguard.properties.engine`); each edge taken into a table's bad location
is a `Violation` whose witness is the request's events so far (the event
included) and whose detail prints the edge and its guard as written. The
lifecycle table WF always runs, as in `rvguard.monitors.Monitor`: it refuses
the events that break the protocol (nothing else sees them), and is
*reported* only when it is among the tables asked for.

Cost: O(edges tried) per event; memory O(live requests × tables). This module is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..contract import Contract
from ..events import Event
from ..verdict import Violation
from .bound import BoundEdge, BoundTable
from .engine import Inst, Product
from .table import PropertyTable

__all__ = ["TableMonitor", "violation"]


def violation(b: BoundTable, be: BoundEdge, inst: Inst, ev: Event, witness: tuple[Event, ...]) -> Violation:
    """The violation of an edge into bad: the edge and its guard as written, the location it left."""
    e = be.edge
    detail = f"{ev.kind.value} from {e.source} with [{e.guard_text}] reaches {e.target} ({e.where})"
    context = {"edge": str(e), "guard": e.guard_text, "source": e.source, "where": e.where}
    return Violation(b.name, inst.rid, ev.t, witness, detail, context)


class TableMonitor:
    """Online monitor of property tables over one event stream.

    Args:
        contract: the contract the trace is judged against.
        tables: the tables to report (WF's is added unreported when absent).
        retain: finished requests remembered for the protocol (None: all).
    """

    def __init__(
        self, contract: Contract, tables: Sequence[PropertyTable], *, retain: int | None = None
    ) -> None:
        from .builtin import WF

        self._report = {t.name for t in tables}
        protocol = [] if any(t.protocol for t in tables) else [WF]
        self.product = Product(contract, [*protocol, *tables], retain=retain)
        self._violations: list[Violation] = []

    @property
    def properties(self) -> tuple[str, ...]:
        """The names of the reported tables."""
        return tuple(b.name for b in self.product.tables if b.name in self._report)

    def feed(self, ev: Event) -> list[Violation]:
        """Consume one event; return the violations it revealed.

        Raises:
            TraceOrderError: ``ev.t`` is earlier than the monitor's time.
            UnknownTenantError: an ``arrive`` names a tenant the contract lacks.
        """
        product = self.product
        plan = product.plan(ev)
        if plan is None:
            product.advance(ev.t)
            return []
        inst, _, chosen = plan
        bad = [(product.tables[i], be) for i, be in enumerate(chosen) if be is not None and be.bad]
        if not bad:
            product.commit(plan)
            return []
        if product.refused(chosen):
            witness = (*inst.events, ev)
            bad = [(b, be) for b, be in bad if b.protocol]
        else:
            product.commit(plan)
            witness = tuple(inst.events)
        out = [violation(b, be, inst, ev, witness) for b, be in bad if b.name in self._report]
        self._violations += out
        return out

    def feed_all(self, events: Iterable[Event]) -> list[Violation]:
        """Feed every event; return every violation revealed."""
        out: list[Violation] = []
        for ev in events:
            out += self.feed(ev)
        return out

    def violations(self) -> list[Violation]:
        """All violations so far, sorted by (time, property, rid)."""
        return sorted(self._violations, key=lambda v: v.key)
