"""Trace segments: one deployment's history written as several JSONL files.

A gateway writing ``--trace PATH`` starts every file with a *segment header*,
one JSON object on the first line::

    {"kind": "segment", "t": 0.0, "run": "5f0c…", "segment": 0, "origin": 1733300000.25,
     "replica": null, "reason": "start"}

* ``run`` names the process that wrote the segment (a new one at every start);
* ``segment`` numbers the deployment's files 0, 1, 2, … in the order they were
  written (a restart and a rotation each open the next one);
* ``origin`` is the Unix time of the trace's time 0: a restarted gateway keeps
  the first run's origin, so every segment is on one time line and one window
  grid (0 for a replica, whose clock is Unix time);
* ``replica`` is the replica's name (``--replica``), or null;
* ``reason`` is ``start`` (a new run) or ``rotate`` (``--trace-max-bytes``).

The reader skips the header (`rvguard.io.jsonl`); `deployments` groups files
by deployment — the same ``replica`` and ``origin`` — and orders each group
by ``segment``, so ``rvguard check`` reads one deployment's segments as one
history and several deployments (fleet replicas) as a fleet. Files without a
header (traces written by hand, by the simulator or by an older gateway) are
each a deployment of their own. `history` yields a deployment's records in
order; at a run boundary (a restart) the requests still open at the end of the
previous run are closed with a ``fail`` whose reason is ``lost-at-restart``,
recorded in `Lost`: the process died under them, and they are told apart
from protocol (WF) faults.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TraceError, TraceFormatError
from ..events import TERMINAL_KINDS, Event, EventKind, Fail

__all__ = [
    "HEADER_KIND",
    "LOST_AT_RESTART",
    "Deployment",
    "Lost",
    "SegmentHeader",
    "deployments",
    "header_record",
    "history",
    "is_header",
    "read_header",
    "segment_path",
]

HEADER_KIND = "segment"
#: the ``fail`` reason the checker gives a request still open when its process restarted
LOST_AT_RESTART = "lost-at-restart"
_REASONS = ("start", "rotate")


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """A segment's first line (module doc); ``path`` is the file it was read from."""

    run: str
    segment: int
    origin: float
    t: float
    replica: str | None = None
    reason: str = "start"
    path: str = ""


def header_record(h: SegmentHeader) -> dict[str, Any]:
    """The header as the JSON object written on a segment's first line."""
    return {
        "kind": HEADER_KIND,
        "t": h.t,
        "run": h.run,
        "segment": h.segment,
        "origin": h.origin,
        "replica": h.replica,
        "reason": h.reason,
    }


def is_header(rec: Mapping[str, Any]) -> bool:
    """True when a decoded first line is a segment header."""
    return rec.get("kind") == HEADER_KIND


def _number(rec: Mapping[str, Any], name: str) -> float:
    v = rec.get(name)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise TraceFormatError(f"a segment header needs a finite number ≥ 0, got {v!r}", field=name)
    return float(v)


def parse_header(rec: Mapping[str, Any], path: str = "") -> SegmentHeader:
    """Validate a decoded header.

    Raises:
        TraceFormatError: a missing or mistyped field (``.field`` names it).
    """
    run = rec.get("run")
    if not isinstance(run, str) or not run:
        raise TraceFormatError(
            f"a segment header names its run (a non-empty string), got {run!r}", field="run"
        )
    seg = rec.get("segment")
    if isinstance(seg, bool) or not isinstance(seg, int) or seg < 0:
        raise TraceFormatError(
            f"a segment header numbers its segment (an integer ≥ 0), got {seg!r}", field="segment"
        )
    replica = rec.get("replica")
    if replica is not None and (not isinstance(replica, str) or not replica):
        raise TraceFormatError(
            f"replica must be a non-empty string or null, got {replica!r}", field="replica"
        )
    reason = rec.get("reason", "start")
    if reason not in _REASONS:
        raise TraceFormatError(f"reason must be one of {', '.join(_REASONS)}, got {reason!r}", field="reason")
    return SegmentHeader(run, seg, _number(rec, "origin"), _number(rec, "t"), replica, str(reason), path)


def read_header(path: str) -> SegmentHeader | None:
    """The header of a JSONL file, or None when its first line is not one (or the file is empty).

    Raises:
        TraceFormatError: a first line that is a header with a bad field (located).
    """
    if not path.endswith((".jsonl", ".ndjson", ".json")) or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        first = f.readline(1 << 16)
    try:
        rec = json.loads(first.decode("utf-8").lstrip("\ufeff"))
    except ValueError:
        return None
    if not isinstance(rec, dict) or not is_header(rec):
        return None
    try:
        return parse_header(rec, path)
    except TraceFormatError as err:
        raise err.located(path=path, line=1) from None


def segment_path(base: str | os.PathLike[str], index: int) -> str:
    """The file of segment ``index`` of the trace ``base``: ``base`` itself, then ``NAME.1.jsonl``, …"""
    base = os.fspath(base)
    if index == 0:
        return base
    head, tail = os.path.split(base)
    stem, dot, suffix = tail.rpartition(".")
    name = f"{stem}.{index}.{suffix}" if dot and stem else f"{tail}.{index}"
    return os.path.join(head, name)


@dataclass(frozen=True)
class Deployment:
    """One deployment's trace files in order (one file without a header: a deployment of its own)."""

    paths: tuple[str, ...]
    headers: tuple[SegmentHeader, ...] = ()

    @property
    def name(self) -> str:
        """How reports name it: its only file, or ``first … last (n segments)``."""
        if len(self.paths) == 1:
            return self.paths[0]
        return f"{self.paths[0]} … {self.paths[-1]} ({len(self.paths)} segments)"


def _expand(paths: Sequence[str]) -> list[str]:
    """Directories replaced by the JSONL segments in them (files starting with a header)."""
    out: list[str] = []
    for p in paths:
        if not os.path.isdir(p):
            out.append(p)
            continue
        found = [
            os.path.join(p, f)
            for f in sorted(os.listdir(p))
            if f.endswith(".jsonl") and not f.startswith((".", "_"))
        ]
        segs = [f for f in found if read_header(f) is not None]
        out += segs or [p]  # no segment: a partitioned (Parquet) trace, read as one
    return out


def deployments(paths: Sequence[str]) -> list[Deployment]:
    """Group trace files (directories expanded to their segments) by deployment, each in order.

    Raises:
        TraceFormatError: two files claim the same segment of one deployment, or one between two
            given is missing.
    """
    groups: dict[tuple[str | None, float], list[SegmentHeader]] = {}
    order: list[tuple[str | None, float] | str] = []
    for p in _expand(paths):
        h = read_header(p)
        if h is None:
            order.append(p)
            continue
        if (h.replica, h.origin) not in groups:
            groups[h.replica, h.origin] = []
            order.append((h.replica, h.origin))
        groups[h.replica, h.origin].append(h)
    out = []
    for item in order:
        if isinstance(item, str):
            out.append(Deployment((item,)))
            continue
        out += [_chain(heads) for heads in _split(groups[item])]
    return out


def _base(h: SegmentHeader) -> str:
    """The file of segment 0 that ``h``'s file continues, by name (``NAME.3.jsonl`` → ``NAME.jsonl``)."""
    head, tail = os.path.split(h.path)
    stem, dot, suffix = tail.rpartition(".")
    name, dot2, number = stem.rpartition(".")
    if h.segment and dot and dot2 and number == str(h.segment):
        return os.path.join(head, f"{name}.{suffix}")
    return h.path


def _split(heads: list[SegmentHeader]) -> list[list[SegmentHeader]]:
    """One replica's headers as one history, or, when two files claim one segment (two live
    processes started under one replica name), one history per file name."""
    numbers = [h.segment for h in heads]
    if len(set(numbers)) == len(numbers):
        return [heads]
    by_base: dict[str, list[SegmentHeader]] = {}
    for h in heads:
        by_base.setdefault(_base(h), []).append(h)
    return list(by_base.values())


def _chain(found: list[SegmentHeader]) -> Deployment:
    """One history's segments in order.

    Raises:
        TraceFormatError: two files claim the same segment, or one between two given is missing.
    """
    heads = sorted(found, key=lambda h: h.segment)
    for a, b in itertools.pairwise(heads):
        if a.segment == b.segment:
            raise TraceFormatError(
                f"segment {a.segment} given twice ({a.path})", path=b.path, field="segment"
            )
        if b.segment > a.segment + 1:  # a hole in the history: its requests would look malformed
            raise TraceFormatError(
                f"segment {a.segment + 1} of this deployment is missing (after {a.path}): "
                "give every segment, or a directory holding them",
                path=b.path,
                field="segment",
            )
    return Deployment(tuple(h.path for h in heads), tuple(heads))


@dataclass(frozen=True, slots=True)
class Lost:
    """A request open when its gateway restarted: closed at ``t`` (the new run's start)."""

    rid: str
    t: float
    path: str  # the segment of the run that lost it

    def to_dict(self) -> dict[str, Any]:
        """The ``lost_at_restart`` item of ``rvguard check --json``."""
        return {"rid": self.rid, "t": self.t, "segment": self.path}


@dataclass
class _Open:
    rids: dict[str, str] = field(default_factory=dict)  # open rid -> the segment it arrived in
    last_t: float = 0.0


def history(dep: Deployment, lost: list[Lost], records: Any) -> Iterator[tuple[str, int, Event | TraceError]]:
    """A deployment's records, segment after segment, as ``(path, line, item)``.

    At a restart (a segment whose run differs from the one before) each request
    still open is closed by a ``fail`` (``lost-at-restart``) at the new run's
    start, located at its header (line 1), and appended to ``lost``.
    ``records`` is the reader (`rvguard.io.iter_records`).
    """
    state = _Open()
    previous: SegmentHeader | None = None
    for i, path in enumerate(dep.paths):
        head = dep.headers[i] if dep.headers else None
        if previous is not None and head is not None and head.run != previous.run:
            t = max(head.t, state.last_t)
            for rid, where in state.rids.items():
                lost.append(Lost(rid, t, where))
                yield path, 1, Fail(t, rid, LOST_AT_RESTART)
            state.rids.clear()
        previous = head
        for line, item in records(path):
            if isinstance(item, Event):
                _track(state, item, path)
            yield path, line, item


def _track(state: _Open, ev: Event, path: str) -> None:
    state.last_t = max(state.last_t, ev.t)
    if ev.kind is EventKind.ARRIVE:
        state.rids.setdefault(ev.rid, path)
    elif ev.kind in TERMINAL_KINDS:
        state.rids.pop(ev.rid, None)
