"""An alert log for the assumption watch: one JSON object a line, what `rvguard review` reads.

Staged adaptation (DESIGN §10) keeps the contract's parameters fixed and logs every time one
proves wrong. `AlertLog` is the logging half for the live guard: pass it as the watch's hook,
``WatchConfig(on_alert=AlertLog("alerts.jsonl"))`` (``rvguard serve --alert-log PATH``), and each
`Alert` is appended as ``{"t", "kind", "detail", "value", "limit"}``. `rvguard review TRACE LOG`
counts them beside what the trace itself shows.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from ..watch_events import Watch
from .watch import Alert

__all__ = ["AlertLog", "alert_record", "warn_alerts"]

_LOG = logging.getLogger("rvguard.watch")


def warn_alerts(records: Iterable[Watch]) -> None:
    """Say each alert at WARNING on the ``rvguard.watch`` logger (a clear at INFO)."""
    for r in records:
        level = logging.INFO if r.condition == "clear" else logging.WARNING
        scale = "" if r.floor_scale is None else f"; floor scale {r.floor_scale:g}"
        _LOG.log(
            level,
            "precondition %s: %.4g against bound %.4g since t=%.6g%s",
            r.condition,
            r.value,
            r.bound,
            r.t if r.since is None else r.since,
            scale,
        )


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
