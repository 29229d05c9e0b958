"""JSON Lines traces (the reference format, DESIGN §8): stream in, stream out.

Reading is one line at a time (constant memory). Each line yields an event or
a located `TraceError` *value*, so callers choose to be strict or lenient.
Rules, each giving an error that names file, line and field:

* a line must be one JSON object; a blank (or whitespace-only) line is an
  error — the only tolerated "empty" thing is the newline ending the file;
* a last line without a newline that is not valid JSON is reported as a
  "truncated last line" (a writer died mid-record);
* ``NaN``/``Infinity``/``-Infinity`` tokens and overflowing numbers (``1e999``)
  are rejected, wherever they appear: they are not JSON and cannot round-trip;
* an object naming a key twice is rejected (parsers disagree on which one
  wins, so two tools could judge different records); so is nesting deeper
  than ``MAX_DEPTH`` and an integer longer than Python's 4300-digit limit;
* a UTF-8 byte-order mark is skipped at the start of the file, and is an
  error anywhere else;
* a segment header (``"kind": "segment"``, `rvguard.io.segments`) is skipped
  on the first line, after its fields are checked, and is an error anywhere else;
* field checks are `rvguard.events.event_from_dict`'s, located here.

Writing is compact (one object a line, floats as ``repr`` so they round-trip
exactly), UTF-8, ``\\n`` line ends, flushed on close.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from ..bounds import MAX_DEPTH, shown
from ..errors import TraceError, TraceFormatError
from ..events import Event, event_from_dict, event_to_dict
from ..untrusted import StructureError, json_duplicate_hook, json_too_deep
from ._lines import bounded_lines
from ._source import STDIO, PathArg, display_name
from .segments import is_header, parse_header

__all__ = ["JsonlWriter", "iter_jsonl", "parse_jsonl_line"]


class _NonFinite(Exception):
    """Raised from inside the JSON parser when a NaN/Infinity token or an overflow appears."""


def _reject_constant(token: str) -> float:
    raise _NonFinite(token)


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _NonFinite(token)
    return value


_COMPACT = (",", ":")
_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=json_duplicate_hook
)
_BOM = b"\xef\xbb\xbf"


class _TooLong:
    """Stands for an integer beyond the digit limit while the faulty field is looked for."""


def _too_long(token: str) -> Any:
    try:
        return int(token)
    except ValueError:
        return _TooLong()


def _faulty_field(raw: str, bad: Callable[[Any], bool]) -> str:
    """Name the top-level key whose value holds a ``bad`` scalar ("" if none is found)."""
    try:
        loose = json.loads(raw, parse_int=_too_long)
    except ValueError:  # the fault came first and the rest is malformed: no field to name
        return ""
    if not isinstance(loose, dict):
        return ""
    for key, value in loose.items():
        if _holds(value, bad):
            return str(key)
    return ""


def _holds(value: Any, bad: Callable[[Any], bool]) -> bool:
    if isinstance(value, dict):
        return any(_holds(v, bad) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, bad) for v in value)
    return bad(value)


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _decode(raw: str, *, last_without_newline: bool) -> dict[str, Any]:
    """Parse one line into a record dict, raising an unlocated `TraceFormatError`."""
    if not raw.strip():
        raise TraceFormatError("blank line (only the newline that ends the file may be empty)")
    if json_too_deep(raw):
        raise TraceFormatError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        rec = _DECODER.decode(raw)
    except _NonFinite as exc:
        raise TraceFormatError(
            f"non-finite number {exc.args[0]!r} (JSON has no NaN or Infinity)",
            field=_faulty_field(raw, _non_finite),
        ) from None
    except StructureError as exc:
        raise TraceFormatError(str(exc), field=exc.key) from None
    except json.JSONDecodeError as exc:
        if last_without_newline:
            raise TraceFormatError(f"truncated last line (no newline at end of file, {exc.msg})") from None
        raise TraceFormatError(f"malformed JSON at column {exc.colno}: {exc.msg}") from None
    except ValueError:  # int() refused a literal beyond sys.get_int_max_str_digits()
        field = _faulty_field(raw, lambda v: isinstance(v, _TooLong))
        raise TraceFormatError("integer longer than 4300 digits", field=field) from None
    if not isinstance(rec, dict):
        raise TraceFormatError(f"must be a JSON object, got {type(rec).__name__}: {shown(raw.strip())}")
    return rec


def parse_jsonl_line(raw: str, *, last_without_newline: bool = False) -> Event:
    """One JSONL line (without its newline) as an event; the error is not yet located.

    Raises:
        TraceFormatError: the line is not one valid trace record.
    """
    return event_from_dict(_decode(raw, last_without_newline=last_without_newline))


def _one(chunk: bytes) -> Event:
    """One raw line (with its line end, if any) as an event; LF and CRLF are both line ends."""
    ended = chunk.endswith(b"\n")
    body = chunk[:-1] if ended else chunk
    if body.endswith(b"\r"):
        body = body[:-1]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"not UTF-8 text (bad byte at column {exc.start + 1})") from None
    return parse_jsonl_line(text, last_without_newline=not ended)


def iter_jsonl(path: PathArg) -> Iterator[tuple[int, Event | TraceError]]:
    """Each line of a JSONL trace as (line number, event or located error); ``-`` reads stdin.

    Memory is constant: one line is held at a time, at most `MAX_LINE_BYTES` long.

    Raises:
        LineTooLongError: a line over `MAX_LINE_BYTES` (raised, not yielded: the rest is unreadable).
    """
    name = display_name(path)
    if str(path) == STDIO:
        yield from _iter_stream(sys.stdin.buffer, name)
        return
    with open(path, "rb") as stream:
        yield from _iter_stream(stream, name)


def _header(chunk: bytes) -> bool:
    """True when the first line is a valid segment header (to skip); raises when it is a bad one."""
    if b'"segment"' not in chunk:
        return False
    try:
        rec = _decode(chunk.decode("utf-8").rstrip("\r\n"), last_without_newline=False)
    except (TraceError, UnicodeDecodeError):
        return False  # not a header: the event parser reports it
    if not is_header(rec):
        return False
    parse_header(rec)
    return True


def _iter_stream(stream: IO[bytes], name: str) -> Iterator[tuple[int, Event | TraceError]]:
    for lineno, chunk in enumerate(bounded_lines(stream, name), start=1):
        if lineno == 1 and chunk.startswith(_BOM):
            chunk = chunk[len(_BOM) :]
        try:
            if lineno == 1 and _header(chunk):
                continue
            yield lineno, _one(chunk)
        except TraceError as err:
            yield lineno, err.located(path=name, line=lineno)


class JsonlWriter:
    """Writes events as JSON Lines, one compact object a line; ``-`` writes stdout."""

    def __init__(self, path: PathArg) -> None:
        self.path = display_name(path)
        self._own = str(path) != STDIO
        self._out: IO[str] = (
            open(path, "w", encoding="utf-8", newline="\n") if self._own else sys.stdout  # noqa: SIM115
        )
        self._count = 0

    def write(self, event: Event) -> None:
        """Append one event.

        Raises:
            TraceFormatError: the event holds a value JSON cannot carry (NaN, an object).
        """
        self._count += 1
        try:
            text = json.dumps(event_to_dict(event), separators=_COMPACT, ensure_ascii=False, allow_nan=False)
            self._out.write(text + "\n")  # encoded whole before writing: a lone surrogate writes nothing
        except (TypeError, ValueError) as exc:
            raise TraceFormatError(f"cannot write as JSON: {exc}", path=self.path, line=self._count) from None

    def close(self) -> None:
        """Flush, and close the file unless it is stdout."""
        self._out.flush()
        if self._own:
            self._out.close()
