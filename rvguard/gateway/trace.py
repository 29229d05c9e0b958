"""The gateway's trace file: never truncated, and loud when it cannot be written.

Policy (README, "Serving"):

* A trace is evidence, so it is never truncated: `TraceFile` refuses a path
  that already holds data (`SpecError`, exit 2 from ``rvguard serve``) rather
  than appending, because a second run's events would restart the clock at
  the contract's epoch and reuse its rids, and the file would no longer be one
  checkable run. An existing empty file is used (appended to).
* When a write fails (a full disk), the request is served all the same (the
  Guard applies every decision whatever its sinks do; the answer reaches the
  client) and the failure is loud: an ERROR log line, ``rvguard_sink_errors_total``
  and ``rvguard_trace_failing`` in ``/metrics``, and ``/readyz`` answering 503
  until a write succeeds again, so an orchestrator takes the replica out of
  rotation. The record that failed is lost; the next one starts on a fresh line
  (a half-written line stays one bad line, which ``rvguard check --lenient`` skips).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ..errors import SpecError
from ..events import Arrive, Event, event_to_dict

__all__ = ["TraceFile"]

log = logging.getLogger("rvguard.gateway")


class TraceFile:
    """A Guard sink writing one JSON object a line, unbuffered: one ``write`` a line, so a crash
    loses at most one line and a failed write is not retried behind the next one's back.

    ``annotate(rid, fields)`` adds fields (the request id, the trace context) to
    that request's ``arrive`` record; they are unknown fields to the trace
    format, which keeps them.

    Raises:
        SpecError: the path holds data already, or cannot be opened.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            if self.path.is_file() and self.path.stat().st_size > 0:
                raise SpecError(
                    f"{self.path}: the trace file already holds events; rvguard never truncates or mixes "
                    "runs in one trace: pass a new path (or move the old trace)",
                    field="trace",
                    value=str(self.path),
                )
            self._out: IO[bytes] = open(self.path, "ab", buffering=0)  # noqa: SIM115 - one write(2) a line
        except OSError as err:
            raise SpecError(f"{self.path}: cannot open the trace: {err}", field="trace") from None
        self._notes: dict[str, Mapping[str, Any]] = {}
        self.failing = False
        self.errors = 0

    def annotate(self, rid: str, fields: Mapping[str, Any]) -> None:
        """Fields to add to ``rid``'s ``arrive`` record, beside those added before (dropped after it
        is written)."""
        before = self._notes.get(rid)
        self._notes[rid] = fields if before is None else {**before, **fields}

    def forget(self, rid: str) -> None:
        """Drop ``rid``'s pending annotation (a request that never arrived)."""
        self._notes.pop(rid, None)

    def __call__(self, event: Event) -> None:
        """Append ``event``; on failure record it, log it and raise (the Guard counts it)."""
        rec = event_to_dict(event)
        if isinstance(event, Arrive):
            rec.update((k, v) for k, v in self._notes.pop(event.rid, {}).items() if k not in rec)
        line = json.dumps(rec, separators=(",", ":"), allow_nan=False) + "\n"
        try:
            self._write_all((("\n" + line) if self.failing else line).encode())
        except OSError as err:
            self.errors += 1
            self.failing = True
            log.error(
                "trace write failed: %s",
                err,
                extra={"event": "sink_error", "rid": event.rid, "path": str(self.path)},
            )
            raise
        if self.failing:
            log.warning(
                "trace writes succeed again", extra={"event": "sink_recovered", "path": str(self.path)}
            )
        self.failing = False

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._out.write(view)
            view = view[written or 0 :]

    def close(self) -> None:
        """Flush and close."""
        self._out.close()
