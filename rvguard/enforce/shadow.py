"""The shield beside a running Guard: every event the decision core emits is shown to the shield of
the user's (and any built-in) tables, in order, before the sinks write it.

In shadow mode (``Guard(properties=[...], shadow=True)``) the event goes out as the core decided,
and a decision other than ``pass`` — the shield would have suppressed, delayed or replaced it —
is an `Alert` of kind ``shield``, as is a violation by an uncontrollable event (a late
completion): kept in `ShieldHook.alerts`, passed to the watch's ``on_alert`` hook when the Guard
has one (``rvguard serve --alert-log``), and logged. A disagreement is never silent.

Refusing the core's own events live needs the core to ask before it applies a move; this hook
does not do that (the core's decisions stand): it observes and alerts.

Without tables the Guard makes no hook and pays nothing per event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from ..contract import Contract
from ..events import Event
from ..properties.shield import Decision, Shield
from ..properties.table import PropertyTable
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
        self.shield = Shield(contract, tables)
        on_alert = watch.on_alert if watch is not None else None
        self.alerts: list[Alert] = []
        self.decisions: list[tuple[Event, Decision]] = []
        self._on_alert = on_alert  # the watch's hook (rvguard serve --alert-log)
        self._seen = 0

    def observe(self, events: Iterable[Event]) -> None:
        """Show the core's events to the shield; alert on each disagreement and each violation."""
        shield = self.shield
        for ev in events:
            d = shield.decide(ev, shadow=True)
            if not d.passed:  # one alert: the violation it commits in shadow is this one
                self.decisions.append((ev, d))
                what = f"the shield would {d.action} {ev.kind.value} of {ev.rid}"
                self._alert(ev.t, f"{what}: {d.property} {d.edge}")
                self._seen = len(shield.violations)
            while self._seen < len(shield.violations):
                v = shield.violations[self._seen]
                self._seen += 1
                self._alert(
                    v.t, f"{v.property} violated by {v.witness[-1].kind.value} of {v.rid}: {v.detail}"
                )

    def _alert(self, t: float, detail: str) -> None:
        alert = Alert(t, "shield", detail)
        self.alerts.append(alert)
        log.warning("%s", detail)
        if self._on_alert is not None:
            self._on_alert(alert)
