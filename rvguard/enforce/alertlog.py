"""An alert log for the assumption watch: one JSON object a line, what `rvguard review` reads.

Staged adaptation (DESIGN §10) keeps the contract's parameters fixed and logs every time one
proves wrong. `AlertLog` is the logging half for the live guard: pass it as the watch's hook,
``WatchConfig(on_alert=AlertLog("alerts.jsonl"))`` (``rvguard serve --alert-log PATH``), and each
`Alert` is appended as ``{"t", "kind", "detail", "value", "limit"}``. `rvguard review TRACE LOG`
counts them beside what the trace itself shows.
"""

from __future__ import annotations

import json
from pathlib import Path

from .watch import Alert

__all__ = ["AlertLog", "alert_record"]


def alert_record(alert: Alert) -> dict[str, object]:
    """The JSON object one alert is written as."""
    return {
        "t": alert.t,
        "kind": alert.kind,
        "detail": alert.detail,
        "value": alert.value,
        "limit": alert.limit,
    }


class AlertLog:
    """Appends each alert to ``path`` as a JSON line (opened, written and closed per alert: alerts
    are rare, and no file is left open for a Guard that never closes its hooks)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.written = 0

    def __call__(self, alert: Alert) -> None:
        """Write one alert."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(alert_record(alert), allow_nan=False) + "\n")
        self.written += 1
