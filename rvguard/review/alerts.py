"""The alert log `rvguard review` reads beside a trace: what the guard noticed live.

One JSON object a line, as `rvguard.enforce.alertlog.AlertLog` writes it from the assumption
watch (``{"t", "kind", "detail", "value", "limit"}``, ``kind`` one of ``service``, ``capacity``,
``clear``). Lines of the gateway's JSON log that carry ``"event": "assumption_alert"`` (the same
fields) are read too; any other JSON object is counted as ``other`` (never skipped silently).
A line that is not a JSON object is an input error naming the line.

Cost: O(lines); memory O(kinds).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..errors import TraceFormatError
from ..io._lines import bounded_lines
from ..untrusted import StructureError, load_json

__all__ = ["ALERT_KINDS", "count_alerts"]

ALERT_KINDS = ("service", "capacity", "clear")


def _kind(obj: dict[str, object]) -> str:
    if "event" in obj and obj.get("event") != "assumption_alert":
        return "other"
    kind = obj.get("kind")
    return kind if isinstance(kind, str) and kind in ALERT_KINDS else "other"


def count_alerts(path: str | Path) -> dict[str, int]:
    """How many alerts of each kind the log holds (plus ``other`` lines).

    Raises:
        TraceFormatError: a line that is not a JSON object (with its number).
        OSError: the file cannot be read.
    """
    counts: Counter[str] = Counter()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(bounded_lines(f, str(path)), 1):
            if not line.strip():
                continue
            try:
                obj = load_json(line)
            except (ValueError, StructureError) as exc:
                raise TraceFormatError(f"not JSON: {exc}", path=str(path), line=n) from None
            if not isinstance(obj, dict):
                raise TraceFormatError("an alert is a JSON object", path=str(path), line=n)
            counts[_kind(obj)] += 1
    return dict(counts)
