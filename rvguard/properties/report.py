"""``rvguard check TRACE --contract SPEC --property FILE``: a trace judged against property tables.

The trace is judged twice, by the online monitor and by the offline checker compiled from the same
tables; their verdicts must agree, and a difference is reported as such (never hidden behind one of
them). The text names each table, whether it holds, and each violation with its edge and guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import Contract
from ..errors import TraceError
from ..events import Event
from ..verdict import Violation
from .monitor import TableMonitor
from .offline import check_columns
from .table import PropertyTable

__all__ = ["TableReport", "judge", "judge_file"]


@dataclass
class TableReport:
    """The tables' verdicts on one trace: violations, the offline path per table, and whether the
    online monitor and the offline checker agreed."""

    tables: list[PropertyTable]
    violations: list[Violation]
    paths: dict[str, str] = field(default_factory=dict)
    agree: bool = True

    @property
    def holds(self) -> bool:
        """No table violated (and the two judges agreed)."""
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
        }

    def render(self) -> str:
        """The text form: one line a table, then each violation."""
        lines = []
        for t in self.tables:
            n = sum(v.property == t.name for v in self.violations)
            verdict = "holds" if n == 0 else f"VIOLATED ({n})"
            lines.append(
                f"property {t.name}: {verdict} — {t.description} [{self.paths.get(t.name, 'online')}]"
            )
        for v in self.violations[:50]:
            lines.append(f"  {v.property} {v.rid} at t={v.t:g}: {v.detail}")
        if len(self.violations) > 50:
            lines.append(f"  ... {len(self.violations) - 50} more (--json lists all)")
        if not self.agree:
            lines.append(
                "  the online monitor and the offline checker DISAGREE on this trace: please report it"
            )
        return "\n".join(lines)


def judge(contract: Contract, tables: Sequence[PropertyTable], events: Sequence[Event]) -> TableReport:
    """Judge ``events`` online and offline; the online verdicts are reported, the offline ones checked."""
    online = TableMonitor(contract, tables)
    online.feed_all(events)
    found = online.violations()
    offline = check_columns(contract, tables, events)
    same = [(v.property, v.rid, v.t, v.witness) for v in found] == [
        (v.property, v.rid, v.t, v.witness) for v in offline.violations
    ]
    return TableReport(list(tables), found, offline.paths, same)


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
