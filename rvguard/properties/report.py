"""``rvguard check TRACE --contract SPEC --property FILE``: a trace judged against property tables.

The trace is judged twice, by the online monitor and by the offline checker compiled from the same
tables; their verdicts must agree, and a difference is reported as such (never hidden behind one of
them). The text names each table, whether it holds, and each violation with its edge and guard.

A table broken because a built-in guarantee went first — a floor admission (AF), a floor dispatch
(SF) or an emergency eviction past the hard floor (EV) the live gate let out over the table
(`rvguard.enforce.gate`) — is **declared**, not violated,
when the trace bears it out: an ``alert`` record with condition ``shield`` at the breaking event's
time naming the table, the request, the event's kind and the guarantee (``first``). Declared breaks
are listed apart (``rvguard check`` exits 3 when they are all there is, as for AF's declared floor
lowerings); a break with no such record stays a violation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import Contract
from ..errors import TraceError
from ..events import Event
from ..verdict import Violation
from ..watch_events import SHIELD, Watch
from .monitor import TableMonitor
from .offline import check_columns
from .table import PropertyTable

__all__ = ["Declared", "TableReport", "judge", "judge_file", "split_declared"]


@dataclass
class TableReport:
    """The tables' verdicts on one trace: violations, the offline path per table, and whether the
    online monitor and the offline checker agreed."""

    tables: list[PropertyTable]
    violations: list[Violation]
    paths: dict[str, str] = field(default_factory=dict)
    agree: bool = True
    #: breaks the trace declares (a built-in guarantee went first, a shield alert says so)
    declared: list[Declared] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """No table violated (and the two judges agreed); declared breaks do not count."""
        return not self.violations and self.agree

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "holds": self.holds,
            "agree": self.agree,
            "paths": self.paths,
            "properties": {
                t.name: not any(v.property == t.name for v in self.violations) for t in self.tables
            },
            "violations": [v.to_dict() for v in self.violations],
            "declared": [d.to_dict() for d in self.declared],
        }

    def render(self) -> str:
        """The text form: one line a table, then each violation."""
        lines = []
        for t in self.tables:
            n = sum(v.property == t.name for v in self.violations)
            k = sum(d.violation.property == t.name for d in self.declared)
            verdict = ("holds" if n == 0 else f"VIOLATED ({n})") + (f", {k} declared" if k else "")
            lines.append(
                f"property {t.name}: {verdict} — {t.description} [{self.paths.get(t.name, 'online')}]"
            )
        for v in self.violations[:50]:
            lines.append(f"  {v.property} {v.rid} at t={v.t:g}: {v.detail}")
        if len(self.violations) > 50:
            lines.append(f"  ... {len(self.violations) - 50} more (--json lists all)")
        for d in self.declared[:50]:
            v = d.violation
            lines.append(
                f"  declared: {v.property} {v.rid} at t={v.t:g}: {d.first} came first "
                f"(shield alert at t={v.t:g}): {v.detail}"
            )
        if len(self.declared) > 50:
            lines.append(f"  ... {len(self.declared) - 50} more declared (--json lists all)")
        if not self.agree:
            lines.append(
                "  the online monitor and the offline checker DISAGREE on this trace: please report it"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class Declared:
    """A table's break the trace declares: ``first`` (AF or SF) went first, ``alert`` its record's detail."""

    violation: Violation
    first: str
    alert: str

    def to_dict(self) -> dict[str, Any]:
        """The ``declared`` item of ``--json``: the violation, the guarantee that went first, the alert."""
        return {**self.violation.to_dict(), "first": self.first, "alert": self.alert}


#: the built-in guarantees a user's table yields to (`rvguard.enforce.gate`): the floor admission,
#: the floor dispatch, the emergency eviction past the hard floor
FIRST = frozenset({"AF", "SF", "EV"})


def split_declared(
    events: Sequence[Event], violations: Sequence[Violation]
) -> tuple[list[Violation], list[Declared]]:
    """The violations no shield alert declares, and the declared breaks (module doc)."""
    conceded: dict[tuple[float, str, str, str], Watch] = {}
    for ev in events:
        if isinstance(ev, Watch) and ev.condition == SHIELD and ev.extra.get("first") in FIRST:
            x = ev.extra
            conceded.setdefault(
                (ev.t, str(x.get("property")), str(x.get("request")), str(x.get("event"))), ev
            )
    faults: list[Violation] = []
    declared: list[Declared] = []
    for v in violations:
        record = conceded.get((v.t, v.property, v.rid, v.witness[-1].kind.value)) if v.witness else None
        if record is None:
            faults.append(v)
        else:
            declared.append(Declared(v, str(record.extra["first"]), str(record.extra.get("detail", ""))))
    return faults, declared


def judge(contract: Contract, tables: Sequence[PropertyTable], events: Sequence[Event]) -> TableReport:
    """Judge ``events`` online and offline; the online verdicts are reported, the offline ones checked;
    breaks a shield alert declares are set apart (module doc)."""
    online = TableMonitor(contract, tables)
    online.feed_all(events)
    found = online.violations()
    offline = check_columns(contract, tables, events)
    same = [(v.property, v.rid, v.t, v.witness) for v in found] == [
        (v.property, v.rid, v.t, v.witness) for v in offline.violations
    ]
    faults, declared = split_declared(events, found)
    return TableReport(list(tables), faults, offline.paths, same, declared)


def judge_file(path: str, contract: Contract, files: Sequence[str]) -> TableReport:
    """Judge the trace file against the tables in ``files`` (`rvguard.properties.commands.load_tables`).

    Raises:
        SpecError: a bad property file.
        TraceError: a malformed record (its line).
    """
    from ..io import iter_records
    from .commands import load_tables

    tables = load_tables(files)
    events: list[Event] = []
    for _line, item in iter_records(path):
        if isinstance(item, TraceError):
            raise item
        events.append(item)
    return judge(contract, tables, events)
