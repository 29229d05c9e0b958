"""The shield beside a running Guard: every event the decision core emits is shown to the shield of
the user's (and any built-in) tables, in order, before the sinks write it.

In shadow mode (``GuardConfig(properties=[...], shadow=True)``, ``rvguard serve --property FILE
--shadow``) the event goes out as the core decided, and a decision other than ``pass`` — the
shield would have suppressed, delayed or replaced it — is an alert, as is a violation by an
uncontrollable event (a late completion): an ``alert`` record with condition ``shield`` in the
trace (its ``detail`` says what and which edge), an `Alert` of kind ``shield`` kept in
`ShieldHook.alerts` and passed to the watch's ``on_alert`` hook when the Guard has one (``rvguard
serve --alert-log``), and a log line. A disagreement is never silent.

Enforcing the tables live (the default of ``GuardConfig(properties=[...])``) is `rvguard.enforce.gate`,
which builds on this hook.

Without tables the Guard makes no hook and pays nothing per event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from ..contract import Contract
from ..events import Event
from ..properties.shield import Decision, Shield
from ..properties.table import PropertyTable
from ..watch_events import SHIELD, Watch
from .watch import Alert, WatchConfig

__all__ = ["ShieldHook"]

log = logging.getLogger("rvguard.properties")


class ShieldHook:
    """A `Shield` in shadow beside the core (see the module docstring)."""

    def __init__(
        self,
        contract: Contract,
        tables: Sequence[PropertyTable],
        watch: WatchConfig | None = None,
    ) -> None:
        # the core's events are legal by construction (its table is the lifecycle's): no WF here
        self.shield = Shield(contract, tables, lifecycle=False)
        on_alert = watch.on_alert if watch is not None else None
        self.alerts: list[Alert] = []
        self.decisions: list[tuple[Event, Decision]] = []
        self._on_alert = on_alert  # the watch's hook (rvguard serve --alert-log)
        #: no log line per alert (the simulator: its records are in the trace, and a run has thousands)
        self.quiet = False
        self._seen = 0
        self._records: list[Watch] = []
        self._unsent: list[Alert] = []  # logged and passed to the hook by `drain`

    def observe(self, events: Iterable[Event]) -> None:
        """Show the core's events to the shield; alert on each disagreement and each violation."""
        passes = self.shield.product.step  # `Shield.passes`, one call fewer an event
        for ev in events:
            if not passes(ev):  # the common case passes: committed, nothing to report
                self._disagree(ev)

    def through(self, events: list[Event]) -> list[Event]:
        """`observe` ``events``; they go on, followed by the alert records they raised."""
        self.observe(events)
        return [*events, *self.drain()] if self._records else events

    def drain(self) -> list[Watch]:
        """The ``alert`` records (condition ``shield``) raised since the last call, for the trace; their
        alerts are logged and handed to the watch's hook here, outside the core's call (which may
        have raised them: the core does no I/O)."""
        for alert in self._unsent:
            if not self.quiet:
                log.warning("%s", alert.detail)
            if self._on_alert is not None:
                self._on_alert(alert)
        self._unsent.clear()
        out, self._records = self._records, []
        return out

    def _step(self, ev: Event, why: str = "", first: str = "") -> None:
        """Commit ``ev`` as emitted; a decision other than ``pass`` is an alert (``why``: who wins;
        ``first``: the built-in property whose guarantee went first, traced as the record's field)."""
        if not self.shield.passes(ev):  # the common case: no table goes bad, nothing to report
            self._disagree(ev, why, first)

    def _disagree(self, ev: Event, why: str = "", first: str = "") -> None:
        """``ev`` reaches some table's bad location: commit it as emitted, and alert."""
        d = self.shield.decide(ev, shadow=True)
        if not d.passed:  # one alert: the violation it commits in shadow is this one
            self.decisions.append((ev, d))
            what = f"the shield would {d.action} {ev.kind.value} of {ev.rid}: {d.property} {d.edge}"
            fields = {"property": d.property, "request": ev.rid, "event": ev.kind.value}
            self._alert(ev.t, f"{what}; {why}" if why else what, fields | ({"first": first} if first else {}))
            self._seen = len(self.shield.violations)
        self._report()

    def _report(self) -> None:
        """An alert for each violation not yet reported (an uncontrollable event, a monitor-only table)."""
        violations = self.shield.violations
        while self._seen < len(violations):
            v = violations[self._seen]
            self._seen += 1
            last = v.witness[-1].kind.value
            fields = {"property": v.property, "request": v.rid, "event": last}
            self._alert(v.t, f"{v.property} violated by {last} of {v.rid}: {v.detail}", fields)

    def _alert(self, t: float, detail: str, fields: Mapping[str, str] | None = None) -> None:
        """An alert and its record; ``fields`` (property, request, event, first) ride on the record."""
        alert = Alert(t, SHIELD, detail)
        self.alerts.append(alert)
        self._unsent.append(alert)
        extra = {"detail": detail, **(fields or {})}
        self._records.append(Watch(t, SHIELD, extra=MappingProxyType(extra)))
