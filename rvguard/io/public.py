"""Public LLM-serving traces as arrival streams (DESIGN §2, issue 5's replay workloads).

Three formats, recognised by their columns or keys (`detect_public_format`):

* ``azure``: Azure LLM inference trace 2023, CSV ``TIMESTAMP,ContextTokens,
  GeneratedTokens``; ``TIMESTAMP`` is ``YYYY-MM-DD HH:MM:SS.fffffff`` (7
  fractional digits, parsed exactly as integer nanoseconds, not via datetime's
  microseconds).
* ``mooncake``: Mooncake FAST'25 JSONL, ``timestamp`` (ms), ``input_length``,
  ``output_length`` (``hash_ids`` and other keys ignored).
* ``burstgpt``: BurstGPT CSV, ``Timestamp`` (s), ``Request tokens``,
  ``Response tokens`` (other documented columns ignored; rows with 0 response
  tokens, the failed requests, are kept: filter them if you want).

Each yields `PublicArrival` rows re-based so the first arrival is at t = 0.
A bad row raises `TraceFormatError` (file, line, column); a timestamp earlier
than the previous row's raises `TraceOrderError`. `to_arrivals` turns rows into
`Arrive` events with a stated, seeded tenant rule, an output cap and,
optionally, a time scale to a target mean rate.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, Protocol, TypeAlias

from ..bounds import MAX_TIME, MAX_TOKENS, shown
from ..contract import Contract
from ..errors import LineTooLongError, TraceError, TraceFormatError, TraceOrderError
from ..events import Arrive
from ..untrusted import load_json
from ._lines import bounded_lines
from ._source import PathArg, display_name

__all__ = [
    "EveryKthRule",
    "FractionRule",
    "PublicArrival",
    "PublicFormat",
    "TenantRule",
    "detect_public_format",
    "iter_public",
    "read_public",
    "to_arrivals",
]

PublicFormat: TypeAlias = Literal["azure", "mooncake", "burstgpt"]

_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_MOONCAKE = ("timestamp", "input_length", "output_length")
_BURSTGPT = ("Timestamp", "Request tokens", "Response tokens")
_AZURE_TS = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_INT = re.compile(r"\d+")
_SECONDS = re.compile(r"\d+(\.\d*)?|\.\d+")


@dataclass(frozen=True, slots=True)
class PublicArrival:
    """One request of a public trace: arrival time (s, from the first arrival) and its sizes."""

    t: float
    prompt_tokens: int
    output_tokens: int


def detect_public_format(path: PathArg) -> PublicFormat:
    """Which public format ``path`` holds, from its header (CSV) or first object's keys (JSONL).

    Raises:
        TraceFormatError: none of the known column or key sets is present.
    """
    name = display_name(path)
    with open(path, "rb") as f:
        raw = next(bounded_lines(f, name), b"")
    try:
        first = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TraceFormatError("not UTF-8 text", path=name, line=1) from None
    if first.lstrip().startswith("{"):
        try:
            keys = set(load_json(first))
        except (ValueError, TypeError) as exc:  # malformed, too deep, a key twice, not an object
            raise TraceFormatError(f"malformed JSON in the first line: {exc}", path=name, line=1) from None
        if set(_MOONCAKE) <= keys:
            return "mooncake"
        found = ", ".join(sorted(map(str, keys)))
    else:
        try:
            header = set(next(csv.reader([first]), []))
        except csv.Error as exc:
            raise TraceFormatError(f"malformed CSV header: {exc}", path=name, line=1) from None
        if set(_AZURE) <= header:
            return "azure"
        if set(_BURSTGPT) <= header:
            return "burstgpt"
        found = ", ".join(sorted(header))
    raise TraceFormatError(
        f"not a known public trace (Azure {'/'.join(_AZURE)}, Mooncake {'/'.join(_MOONCAKE)}, "
        f"BurstGPT {'/'.join(_BURSTGPT)}); found: {found}",
        path=name,
        line=1,
    )


def _azure_ns(text: str) -> int:
    """An Azure ``TIMESTAMP`` as integer nanoseconds since 0001-01-01 (exact: 7 digits kept)."""
    m = _AZURE_TS.fullmatch(text.strip())
    if m is None:
        raise TraceFormatError(f"must look like 2023-11-16 18:17:03.9799600, got {text!r}", field="TIMESTAMP")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    try:
        days = date(y, mo, d).toordinal()
    except ValueError as exc:
        raise TraceFormatError(f"bad date {text!r}: {exc}", field="TIMESTAMP") from None
    if h > 23 or mi > 59 or s > 59:
        raise TraceFormatError(f"bad time of day {text!r}", field="TIMESTAMP")
    frac = int((m.group(7) or "").ljust(9, "0"))
    return ((days * 24 + h) * 60 + mi) * 60 * 10**9 + s * 10**9 + frac


def _count(value: Any, column: str) -> int:
    """A token count: a whole number in [0, MAX_TOKENS] (text or JSON number)."""
    if isinstance(value, str) and _INT.fullmatch(value.strip()) and len(value.strip()) <= 12:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    raise TraceFormatError(f"must be a whole number in [0, {MAX_TOKENS}], got {shown(value)}", field=column)


def _burst_seconds(value: str) -> float:
    seconds = float(value) if _SECONDS.fullmatch(value.strip()) else -1.0
    if not 0 <= seconds <= MAX_TIME:
        raise TraceFormatError(
            f"must be a number of seconds in [0, {MAX_TIME:g}], got {shown(value)}", field="Timestamp"
        )
    return seconds


def _mooncake_ms(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_TIME * 1000:
        raise TraceFormatError(
            f"must be a number of ms in [0, {MAX_TIME * 1000:g}], got {shown(value)}", field="timestamp"
        )
    return float(value)


# A parsed row: (raw time in the format's own unit, prompt tokens, output tokens).
_Row: TypeAlias = tuple[int | float, int, int]


def _csv_row(
    row: dict[str | None, Any], cols: tuple[str, str, str], stamp: Callable[[str], int | float]
) -> _Row:
    if None in row:
        raise TraceFormatError(f"has more cells than the header: {row[None]!r}")
    missing = [c for c in cols if row.get(c) is None]
    if missing:
        raise TraceFormatError("has fewer cells than the header", field=missing[0])
    return stamp(row[cols[0]]), _count(row[cols[1]], cols[1]), _count(row[cols[2]], cols[2])


def _csv_rows(
    path: PathArg, cols: tuple[str, str, str], stamp: Callable[[str], int | float]
) -> Iterator[tuple[int, _Row]]:
    """(file line, row) for each CSV data row; the header is line 1."""
    name = display_name(path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(bounded_lines(f, name), strict=True)
        start = 2
        try:
            for row in reader:
                yield start, _csv_row(row, cols, stamp)
                start = reader.line_num + 1
        except LineTooLongError:
            raise
        except TraceError as err:
            raise err.located(path=name, line=start) from None
        except csv.Error as exc:
            raise TraceFormatError(f"malformed CSV: {exc}", path=name, line=start) from None
        except UnicodeDecodeError:
            raise TraceFormatError("not UTF-8 text", path=name, line=start) from None


def _mooncake_rows(path: PathArg) -> Iterator[tuple[int, _Row]]:
    name = display_name(path)
    with open(path, "rb") as f:
        for line, raw in enumerate(bounded_lines(f, name), start=1):
            try:
                rec = _mooncake_json(raw[3:] if line == 1 and raw.startswith(b"\xef\xbb\xbf") else raw)
                if not isinstance(rec, dict):
                    raise TraceFormatError("must be a JSON object")
                missing = [k for k in _MOONCAKE if k not in rec]
                if missing:
                    raise TraceFormatError("is missing", field=missing[0])
                yield (
                    line,
                    (
                        _mooncake_ms(rec["timestamp"]),
                        _count(rec["input_length"], "input_length"),
                        _count(rec["output_length"], "output_length"),
                    ),
                )
            except TraceError as err:
                raise err.located(path=name, line=line) from None


def _mooncake_json(raw: bytes) -> Any:
    """One Mooncake line, parsed under `rvguard.untrusted`'s rules (depth, no key twice)."""
    try:
        return load_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TraceFormatError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"malformed JSON: {exc.msg}") from None
    except ValueError as exc:  # too deep, a key twice, an integer past the digit limit
        raise TraceFormatError(f"malformed JSON: {exc}") from None


def _rows(path: PathArg, fmt: PublicFormat) -> tuple[Iterator[tuple[int, _Row]], int, str]:
    """The raw rows, the raw time units per second and the time column's name."""
    if fmt == "azure":
        return _csv_rows(path, _AZURE, _azure_ns), 10**9, _AZURE[0]
    if fmt == "burstgpt":
        return _csv_rows(path, _BURSTGPT, _burst_seconds), 1, _BURSTGPT[0]
    return _mooncake_rows(path), 1000, _MOONCAKE[0]


def iter_public(path: PathArg, fmt: PublicFormat | None = None) -> Iterator[PublicArrival]:
    """Stream the arrivals of a public trace, re-based to start at t = 0.

    Args:
        path: the trace file.
        fmt: its format; ``None`` detects it (`detect_public_format`).

    Raises:
        TraceFormatError: a bad row (file, line, column).
        TraceOrderError: a timestamp earlier than the previous row's.
    """
    rows, per_second, column = _rows(path, fmt or detect_public_format(path))
    first: int | float | None = None
    last: int | float = 0
    for line, (stamp, prompt, output) in rows:
        if first is None:
            first = last = stamp
        if stamp < last:
            raise TraceOrderError(
                "timestamp earlier than the previous row's", path=display_name(path), line=line, field=column
            )
        last = stamp
        # Integer ns (Azure) deltas divide exactly: one rounding, to the nearest float.
        yield PublicArrival(t=(stamp - first) / per_second, prompt_tokens=prompt, output_tokens=output)


def read_public(path: PathArg, fmt: PublicFormat | None = None) -> list[PublicArrival]:
    """All arrivals of a public trace (see `iter_public`)."""
    return list(iter_public(path, fmt))


class TenantRule(Protocol):
    """A stated tenant-assignment rule: an endless stream of tenant names, one per arrival."""

    def tenants(self) -> Iterator[str]:
        """A fresh stream (the same one on every call: rules are deterministic)."""
        ...


@dataclass(frozen=True)
class FractionRule:
    """Each arrival is ``assured`` with probability ``fraction``, drawn from ``random.Random(seed)``."""

    fraction: float = 0.5
    seed: int = 0
    assured: str = "assured"
    other: str = "opportunistic"

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {self.fraction!r}")

    def tenants(self) -> Iterator[str]:
        """Seeded Bernoulli draws, one per arrival."""
        rng = random.Random(self.seed)
        while True:
            yield self.assured if rng.random() < self.fraction else self.other


@dataclass(frozen=True)
class EveryKthRule:
    """Every ``k``-th arrival (the k-th, 2k-th, ...) is ``assured``; the rest are ``other``."""

    k: int = 2
    assured: str = "assured"
    other: str = "opportunistic"

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k!r}")

    def tenants(self) -> Iterator[str]:
        """assured at positions k, 2k, ... (1-based)."""
        i = 0
        while True:
            i += 1
            yield self.assured if i % self.k == 0 else self.other


def time_scale(arrivals: list[PublicArrival], rate: float) -> float:
    """The factor that maps the trace's mean rate, (n − 1) / span, onto ``rate`` (per second).

    Raises:
        ValueError: a non-positive rate, fewer than two arrivals, or a zero span.
    """
    if not rate > 0 or rate == float("inf"):
        raise ValueError(f"rate must be a positive finite number, got {rate!r}")
    span = arrivals[-1].t - arrivals[0].t if arrivals else 0.0
    if len(arrivals) < 2 or span <= 0:
        raise ValueError("cannot scale to a rate: the trace needs two arrivals at different times")
    return ((len(arrivals) - 1) / span) / rate


def to_arrivals(
    arrivals: Iterable[PublicArrival],
    *,
    rate: float | None = None,
    tenant_rule: TenantRule | None = None,
    contract: Contract | None = None,
    output_cap: int | None = None,
    rid_prefix: str = "r",
) -> list[Arrive]:
    """Arrive events for a public trace, replayed open-loop.

    Args:
        arrivals: the trace's rows (`read_public`).
        rate: scale time so the mean rate (n − 1) / span equals this (req/s); ``None`` keeps time.
        tenant_rule: who each request belongs to; default ``FractionRule(0.5, seed=0)``.
        contract: when given, each deadline is t + the tenant's deadline, and its
            ``output_cap`` applies unless ``output_cap`` is given.
        output_cap: ``max_tokens`` = min(output tokens, cap); ``None`` (and no contract) keeps them.
        rid_prefix: rids are ``f"{rid_prefix}{i}"``, i from 0.

    Raises:
        ValueError: an impossible rate; a tenant the contract lacks.
    """
    rows = list(arrivals)
    scale = 1.0 if rate is None else time_scale(rows, rate)
    cap = output_cap if output_cap is not None else (contract.output_cap if contract else None)
    names = (tenant_rule or FractionRule()).tenants()
    out: list[Arrive] = []
    for i, (row, tenant) in enumerate(zip(rows, names, strict=False)):
        t = row.t * scale
        deadline = None
        if contract is not None:
            if tenant not in contract.tenants:
                raise ValueError(f"tenant rule gives {tenant!r}, which the contract does not declare")
            deadline = t + contract.tenants[tenant].deadline
        out_tokens = row.output_tokens if cap is None else min(row.output_tokens, cap)
        out.append(
            Arrive(
                t=t,
                rid=f"{rid_prefix}{i}",
                tenant=tenant,
                deadline=deadline,
                prompt_tokens=row.prompt_tokens,
                max_tokens=out_tokens,
            )
        )
    return out
