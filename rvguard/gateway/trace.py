"""The gateway's trace file: never truncated, restart-safe, bounded, and loud when it cannot be written.

Policy (README, "Serving"):

* A trace is evidence, so it is never truncated and never mixes runs: each
  file is a *segment* starting with a header naming its run
  (`rvguard.io.segments`). A start on a path that already holds a trace opens
  the next segment (``NAME.1.jsonl``, ``NAME.2.jsonl``, …) instead: the
  gateway's clock goes on from the first run's origin (`existing_trace`, so
  the segments share one time line and window grid) and its rids carry the
  segment's number (``r2-g0``), so ``rvguard check`` reads the segments as one
  history. A path holding events without a header (an older gateway's) is
  refused (`SpecError`, exit 2). An existing empty file is used.
* With ``max_bytes``, the file in use is rotated to the next segment once it
  holds that many bytes (a line is never split between two segments).
* When a write fails (a full disk), the request is served all the same (the
  Guard applies every decision whatever its sinks do; the answer reaches the
  client) and the failure is loud: an ERROR log line, ``rvguard_sink_errors_total``
  and ``rvguard_trace_failing`` in ``/metrics``, and ``/readyz`` answering 503
  until a write succeeds again, so an orchestrator takes the replica out of
  rotation. The record that failed is lost; the next one starts on a fresh line
  (a half-written line stays one bad line, which ``rvguard check --lenient`` skips).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any, Protocol

from ..clock import Clock
from ..errors import SpecError, TraceError
from ..events import Admit, Arrive, Basis, Event, event_to_dict
from ..io.reader import iter_records
from ..io.segments import SegmentHeader, header_record, read_header, segment_path

__all__ = ["TraceFile", "existing_trace", "prior_arrivals", "resume_window"]

log = logging.getLogger("rvguard.gateway")


class TraceFile:
    """A Guard sink writing one JSON object a line, unbuffered: one ``write`` a line, so a crash
    loses at most one line and a failed write is not retried behind the next one's back.

    ``annotate(rid, fields)`` adds fields (the request id, the trace context) to
    that request's ``arrive`` record; they are unknown fields to the trace
    format, which keeps them. ``rid_prefix`` is what this run's rids start with
    (``""`` on a new trace, ``r<segment>-`` on a restart).

    Args:
        path: the trace (its first segment's file).
        clock: the Guard's clock (its ``origin``, Unix time of its 0, goes in the header).
        replica: this replica's name, recorded in each header.
        max_bytes: rotate to the next segment once a file holds this many bytes (None: never).

    Raises:
        SpecError: the path holds another deployment's or an older gateway's trace, or cannot be opened.
    """

    def __init__(
        self,
        path: str | Path,
        clock: Clock | None = None,
        *,
        replica: str | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.base = Path(path)
        self._clock = clock
        self.max_bytes = max_bytes
        self.run = uuid.uuid4().hex
        prior = existing_trace(self.base)
        if prior is not None and prior[0].replica != replica:
            raise SpecError(
                f"{self.base}: the trace is replica {prior[0].replica!r}'s, not {replica!r}: "
                "pass another path",
                field="trace",
            )
        self.origin = prior[0].origin if prior is not None else float(getattr(clock, "origin", 0.0))
        self.replica = replica
        self.segment = 0 if prior is None else prior[1] + 1
        self.rid_prefix = f"r{self.segment}-" if self.segment else ""
        self._size = 0
        self._notes: dict[str, Mapping[str, Any]] = {}
        self.failing = False
        self.errors = 0
        self._out: IO[bytes] = self._open(self.segment, "start")
        self._head_bytes = self._size  # the header alone: what `abandon` may remove

    @property
    def path(self) -> Path:
        """The segment being written."""
        return Path(segment_path(self.base, self.segment))

    def _open(self, segment: int, reason: str) -> IO[bytes]:
        """Open segment ``segment``'s file and write its header (raises SpecError at start-up)."""
        name = segment_path(self.base, segment)
        t = self._clock.now() if self._clock is not None else 0.0
        head = SegmentHeader(self.run, segment, self.origin, t, self.replica, reason)
        line = (json.dumps(header_record(head), separators=(",", ":")) + "\n").encode()
        try:
            if os.path.isfile(name) and os.path.getsize(name) > 0:  # never mix two runs in one file
                raise OSError("the file already holds a segment")
            out = open(name, "ab", buffering=0)  # noqa: SIM115 - one write(2) a line
        except OSError as err:
            raise SpecError(f"{name}: cannot open the trace: {err}", field="trace") from None
        try:
            out.write(line)
        except OSError as err:  # a full disk: served all the same, loud (as any failed write)
            self.errors += 1
            self.failing = True
            log.error("trace write failed: %s", err, extra={"event": "sink_error", "path": name})
        self._size = len(line)
        return out

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
            if self.max_bytes is not None and self._size >= self.max_bytes:
                self._rotate()
            data = (("\n" + line) if self.failing else line).encode()
            self._write_all(data)
            self._size += len(data)
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

    def _rotate(self) -> None:
        """Go on in the next segment (the old file is closed once the new one holds its header)."""
        try:
            out = self._open(self.segment + 1, "rotate")
        except SpecError as err:
            raise OSError(str(err)) from None
        self._out.close()
        self._out = out
        self.segment += 1
        log.info("trace rotated", extra={"event": "trace_rotated", "path": str(self.path)})

    def abandon(self) -> None:
        """Close, and remove this start's segment when it holds nothing but its header: a start that
        fails on an earlier segment leaves no empty segment behind, so a crash loop adds no file a try."""
        self._out.close()
        with contextlib.suppress(OSError):
            if self.path.stat().st_size <= self._head_bytes:
                self.path.unlink()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._out.write(view)
            view = view[written or 0 :]

    def close(self) -> None:
        """Flush and close."""
        self._out.close()


def existing_trace(path: str | Path) -> tuple[SegmentHeader, int] | None:
    """The first segment's header and the last segment's number of the trace at ``path``; None when
    there is none yet (no file, or an empty one).

    Raises:
        SpecError: the file holds events without a segment header (an older gateway's trace).
    """
    base = os.fspath(path)
    if not os.path.isfile(base) or os.path.getsize(base) == 0:
        return None
    try:
        head = read_header(base)
    except (TraceError, OSError) as err:
        raise SpecError(f"{base}: cannot read the trace's segment header: {err}", field="trace") from None
    if head is None:
        raise SpecError(
            f"{base}: the trace file already holds events with no segment header (an older rvguard's); "
            "rvguard never truncates or mixes runs in one trace: pass a new path (or move the old trace)",
            field="trace",
            value=base,
        )
    last = 0
    while os.path.isfile(segment_path(base, last + 1)):
        last += 1
    return head, last


def prior_arrivals(
    base: str | Path, last: int, since: float
) -> tuple[list[tuple[str, float, int | None, int | None, bool]], int]:
    """The arrivals at or after ``since`` in segments ``last``, ``last − 1``, … of the trace at
    ``base``, oldest first, each with whether it was admitted on the floor; and how many lines could
    not be read (a crash can leave a torn last line). Reading stops at the first segment that starts
    before ``since``: a restarted gateway needs only its current window's arrivals
    (`rvguard.enforce.watching.WatchMixin.resume`).
    """
    found: list[list[tuple[str, float, int | None, int | None, bool]]] = []
    unreadable = 0
    for seg in range(last, -1, -1):
        arrivals: dict[str, Arrive] = {}
        floor: set[str] = set()
        first = math.inf
        for _line, item in iter_records(segment_path(os.fspath(base), seg)):
            if isinstance(item, TraceError):
                unreadable += 1
                continue
            first = min(first, item.t)
            if isinstance(item, Arrive) and item.t >= since:
                arrivals[item.rid] = item
            elif isinstance(item, Admit) and item.basis is Basis.FLOOR:
                floor.add(item.rid)
        found.append(
            [(a.tenant, a.t, a.prompt_tokens, a.max_tokens, rid in floor) for rid, a in arrivals.items()]
        )
        if first < since:
            break
    return [a for seg_arrivals in reversed(found) for a in seg_arrivals], unreadable


class _Resumable(Protocol):
    def resume(
        self, now: float, arrivals: Iterable[tuple[str, float, int | None, int | None, bool]]
    ) -> int: ...


def resume_window(core: _Resumable, trace: TraceFile, now: float, window: float) -> int:
    """After a restart (segment > 0), give ``core`` the arrivals its window already had in the
    previous runs' segments, so the floor is not granted twice in one window; returns how many.
    Logged at INFO, and at WARNING when lines of the old segments could not be read."""
    if trace.segment == 0:
        return 0
    try:
        arrivals, unreadable = prior_arrivals(trace.base, trace.segment - 1, now - window)
    except BaseException:  # e.g. a line longer than the bound: the start fails, loudly and tidily
        trace.abandon()
        raise
    counted = core.resume(now, arrivals)
    log.info(
        "restarted inside a contract window: %d earlier arrival(s) of the window counted against the floor",
        counted,
        extra={"event": "resume", "arrivals": counted},
    )
    if unreadable:
        log.warning(
            "%d line(s) of the earlier trace segments could not be read: their arrivals are not counted",
            unreadable,
            extra={"event": "resume", "unreadable": unreadable},
        )
    return counted
