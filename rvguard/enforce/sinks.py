"""The Guard's stock sinks: a JSON-lines trace file and an online monitor feed.

Kept apart from the Guard runtime (`rvguard.enforce.guard` re-exports both): a
sink is any callable taking each event, these are the two the library ships.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..events import Event
from ..verdict import Violation

__all__ = ["JsonlSink", "MonitorSink"]


class JsonlSink:
    """Writes each event as one JSON object a line (uses `rvguard.io.jsonl.JsonlWriter`)."""

    def __init__(self, path: str | Path) -> None:
        from ..io.jsonl import JsonlWriter

        self._writer = JsonlWriter(path)

    def __call__(self, event: Event) -> None:
        """Append ``event``."""
        self._writer.write(event)

    def close(self) -> None:
        """Flush and close the file."""
        self._writer.close()


class MonitorSink:
    """Feeds an online `rvguard.monitors.Monitor`; calls ``on_violation`` for each violation."""

    def __init__(self, monitor: Any, *, on_violation: Callable[[Violation], object] | None = None) -> None:
        self.monitor = monitor
        self._on_violation = on_violation

    def __call__(self, event: Event) -> None:
        """Feed ``event``; report what it revealed."""
        for v in self.monitor.feed(event):
            if self._on_violation is not None:
                self._on_violation(v)
