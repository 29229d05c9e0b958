"""Headroom telemetry: `HeadroomSample` records from vLLM's Prometheus ``/metrics`` or a callable.

The redline (`rvguard.enforce.redline`) needs each resource's headroom as a fraction, stamped with
the sample's own time. vLLM (V1 engine, the version in ``.venv-vllm``) exports
``vllm:kv_cache_usage_perc`` (a fraction in [0, 1] despite its name), ``vllm:num_requests_running``
and ``vllm:num_requests_waiting``; older engines called the first ``vllm:gpu_cache_usage_perc``,
read when the new name is absent. Resources:

* ``kv_cache`` = 1 − the KV-cache usage (the highest over the engine's label sets);
* ``seqs`` = 1 − running / ``max_num_seqs``, when the engine's ``max_num_seqs`` is given (0 when
  more run: other clients share the engine).

The KV cache's size in tokens is read too, once: vLLM exports its cache configuration as the
labels of ``vllm:cache_config_info`` (``num_gpu_blocks`` × ``block_size`` tokens, one engine's;
the smallest when several engines answer), which `MetricsHeadroomSource.kv_capacity` keeps, so
rationed relief (`rvguard.enforce.rationing`) can turn the headroom fraction into tokens without
being told the cache's size (`rvguard.enforce.pressure`).

Each resource is judged on its own series: one missing or out of range is an error for that
resource alone, and the others' readings stand (the redline judges the dominant share on the
valid ones); only when none is readable is the scrape no sample.

The exposition is parsed with prometheus_client's own text parser. A sample's time is the
scrape's (the guard clock's time when the answer arrived), moved back by the payload's age when
the exporter stamps its samples: a Prometheus timestamp is Unix time, the guard's clock usually
is not (it starts at the contract's epoch), so the payload's age on the wall clock (the wall
clock at the scrape minus the stamp; an exporter clock ahead of ours is age 0) is what carries
it onto the guard's clock. A stamp the source has seen before for a resource is the exporter's
old reading served again: no sample (the redline would ignore it; RL's freshness must not count
it as fresh). A stamp beyond the skew bound (``max_skew`` ahead of the wall clock, ``max_age``
behind it: a year-2286 or a 1970 stamp) or earlier than the resource's previous one (going
backwards) is refused for that resource. `MetricsHeadroomSource.read` polls no faster than
``min_interval`` (set it to the exporter's refresh period): a call sooner returns no sample, so
a loop ticking faster than its telemetry cannot feed the redline duplicates (which it would ignore anyway).

`CallableHeadroomSource` embeds any function returning ``{resource: headroom}``.

Errors are specific: `TelemetryUnavailableError` (refused, timed out, an HTTP error status) and
`TelemetryFormatError` (unparsable text, a metric missing, a value out of range), each naming
the URL and the metric.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..clock import Clock, WallClock
from ..errors import MissingExtraError, TelemetryFormatError, TelemetryUnavailableError
from .redline import HeadroomSample

__all__ = [
    "CACHE_INFO",
    "KV_USAGE",
    "MAX_SCRAPE_BYTES",
    "MAX_STAMP_AGE",
    "MAX_STAMP_SKEW",
    "RUNNING",
    "WAITING",
    "CallableHeadroomSource",
    "HeadroomSource",
    "MetricsHeadroomSource",
    "kv_capacity_from_exposition",
    "samples_from_exposition",
]

KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # new name first
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
CACHE_INFO = "vllm:cache_config_info"  # labels num_gpu_blocks and block_size: the KV cache's size
#: the largest exposition a scrape reads, bytes (vLLM's is a few hundred kB with every histogram)
MAX_SCRAPE_BYTES = 4 << 20
#: how far a payload stamp may be ahead of this clock, and behind it, seconds (else refused)
MAX_STAMP_SKEW, MAX_STAMP_AGE = 30.0, 300.0
_AGAIN = "again"
#: scrapes ask for the text as is: an exporter's compression is never inflated (a bomb stays small)
_IDENTITY = {"accept-encoding": "identity"}


class HeadroomSource(Protocol):
    """Anything that yields fresh headroom samples (an empty list: nothing new yet)."""

    async def read(self) -> list[HeadroomSample]:
        """The samples read now."""
        ...


def _families(
    text: str, source: str, sizes: list[int] | None = None
) -> dict[str, list[tuple[float, float | None]]]:
    """Each sample name's (value, payload timestamp) pairs; ``sizes`` gets each KV cache size the
    text states (`kv_capacity_from_exposition`), in the same pass."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:  # pragma: no cover - the gateway extra brings it
        raise MissingExtraError("prometheus_client", "gateway") from None
    out: dict[str, list[tuple[float, float | None]]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                ts = None if s.timestamp is None else float(s.timestamp)
                out.setdefault(s.name, []).append((float(s.value), ts))
                if sizes is not None and s.name == CACHE_INFO:
                    blocks, size = s.labels.get("num_gpu_blocks", ""), s.labels.get("block_size", "")
                    if blocks.isdigit() and size.isdigit() and int(blocks) * int(size) > 0:
                        sizes.append(int(blocks) * int(size))
    except (ValueError, TypeError, IndexError) as exc:
        raise TelemetryFormatError(f"not Prometheus exposition text: {exc}", source=source) from None
    return out


def kv_capacity_from_exposition(text: str, source: str = "<text>") -> int | None:
    """The KV cache's size in tokens from vLLM's ``vllm:cache_config_info`` labels (module doc):
    ``num_gpu_blocks`` × ``block_size``, the smallest over the engines; ``None`` when absent or
    not whole positive numbers (not yet profiled: vLLM states ``None`` blocks before it has).

    Raises:
        TelemetryFormatError: unparsable text.
    """
    sizes: list[int] = []
    _families(text, source, sizes)
    return min(sizes, default=None)


def _metric(
    fams: Mapping[str, list[tuple[float, float | None]]], names: tuple[str, ...], source: str
) -> tuple[float, float | None]:
    """The highest value of the first of ``names`` present, with its payload timestamp."""
    for name in names:
        values = fams.get(name)
        if values:
            value, ts = max(values, key=lambda v: v[0])
            if not math.isfinite(value) or value < 0:
                raise TelemetryFormatError(
                    f"is not a finite number ≥ 0, got {value!r}", source=source, field=name
                )
            return value, ts
    raise TelemetryFormatError("is missing from the exposition", source=source, field=names[0])


def samples_from_exposition(
    text: str,
    scraped_at: float,
    *,
    wall_at: float,
    source: str = "<text>",
    max_num_seqs: int | None = None,
) -> list[HeadroomSample]:
    """Headroom samples from one ``/metrics`` payload (module doc for the resources and times).

    Args:
        text: the Prometheus text exposition.
        scraped_at: when the answer arrived, on the guard's clock.
        wall_at: the same instant in Unix time; a payload timestamp (Unix time) places its
            sample at ``scraped_at − max(0, wall_at − stamp)``.
        source: where it came from, for errors.
        max_num_seqs: the engine's sequence slots; ``None`` leaves ``seqs`` out.

    Raises:
        TelemetryFormatError: unparsable text, or no resource readable (a metric missing, a
            usage above 1 or not a number ≥ 0).
    """
    return [
        HeadroomSample(resource, headroom, _placed(stamp, scraped_at, wall_at))
        for resource, headroom, stamp in _readings(text, source, max_num_seqs)
    ]


def _placed(stamp: float | None, scraped_at: float, wall_at: float) -> float:
    """A reading's time on the guard's clock: the scrape's, less the payload's age (module doc)."""
    return scraped_at if stamp is None else scraped_at - max(0.0, wall_at - stamp)


Reading = tuple[str, float, float | None]  # (resource, headroom, payload timestamp or None)


def _readings(text: str, source: str, max_num_seqs: int | None) -> list[Reading]:
    """(resource, headroom, payload timestamp or None) for each resource the payload gives.

    Raises:
        TelemetryFormatError: unparsable text, or no resource readable (the first error).
    """
    readings, errors = _each_reading(text, source, max_num_seqs)
    if not readings:
        raise errors[0]
    return readings


def _each_reading(
    text: str,
    source: str,
    max_num_seqs: int | None,
    counts: dict[str, float] | None = None,
    sizes: list[int] | None = None,
) -> tuple[list[Reading], list[TelemetryFormatError]]:
    """Each resource judged on its own series: one missing or out of range leaves the others.
    ``counts`` gets the running and waiting series' values (the requests the engine says it has),
    ``sizes`` the KV cache sizes the text states (one parse for both)."""
    counts = {} if counts is None else counts
    fams = _families(text, source, sizes)
    out: list[Reading] = []
    errors: list[TelemetryFormatError] = []
    counts.update({name: max(v for v, _ in fams[name]) for name in (RUNNING, WAITING) if fams.get(name)})
    try:
        usage, ts = _metric(fams, KV_USAGE, source)
        if usage > 1.0:
            raise TelemetryFormatError(f"is a fraction, got {usage!r}", source=source, field=KV_USAGE[0])
        out.append(("kv_cache", 1.0 - usage, ts))
    except TelemetryFormatError as err:
        errors.append(err)
    if max_num_seqs is not None:
        try:  # more running than max_num_seqs: others share the engine; no sequence slot is free
            running, ts = _metric(fams, (RUNNING,), source)
            out.append(("seqs", max(0.0, 1.0 - running / max_num_seqs), ts))
        except TelemetryFormatError as err:
            errors.append(err)
    return out, errors


class MetricsHeadroomSource:
    """Polls a vLLM engine's ``/metrics`` (module doc).

    Args:
        url: the metrics URL, e.g. ``http://127.0.0.1:8000/metrics``.
        clock: the guard's clock (stamps the scrape).
        wall: Unix time, read with the guard's clock at each scrape to carry a payload's
            timestamps onto it (module doc); default `WallClock`.
        min_interval: seconds between two scrapes at least (the exporter's refresh period).
        max_num_seqs: the engine's ``max_num_seqs`` (adds the ``seqs`` resource).
        timeout: seconds a scrape may take.
        client: an ``httpx.AsyncClient`` to scrape with (the engine's own: a client per scrape
            costs a TLS context, a quarter of a second on a busy machine); ``None``: one per scrape.
        max_bytes: the largest exposition read (`MAX_SCRAPE_BYTES`); a larger one is streamed up
            to the cap, then refused as no sample (`TelemetryFormatError`, counted as an error).
        max_skew, max_age: a payload stamp more than ``max_skew`` seconds ahead of ``wall`` or
            ``max_age`` behind it, or earlier than the resource's previous stamp, is refused (the
            resource gives no sample; the others do; `take_errors` says why).
    """

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        min_interval: float = 1.0,
        max_num_seqs: int | None = None,
        timeout: float = 2.0,
        client: Any = None,
        wall: Clock | None = None,
        max_bytes: int = MAX_SCRAPE_BYTES,
        max_skew: float = MAX_STAMP_SKEW,
        max_age: float = MAX_STAMP_AGE,
    ) -> None:
        if not min_interval >= 0.0:
            raise ValueError(f"min_interval must be ≥ 0, got {min_interval!r}")
        self.url = url
        self._clock = clock
        self._min_interval = min_interval
        self._max_num_seqs = max_num_seqs
        self._timeout = timeout
        self._client = client
        self._wall = WallClock() if wall is None else wall
        self.max_bytes = max_bytes
        self.max_skew, self.max_age = max_skew, max_age
        self._errors: list[TelemetryFormatError] = []
        #: the last scrape's ``vllm:num_requests_running`` / ``_waiting`` values, where present
        self.reported: dict[str, float] = {}
        #: the KV cache's size in tokens, once an exposition stated it (`kv_capacity_from_exposition`)
        self.kv_capacity: int | None = None
        self._stamps: dict[str, float] = {}  # the last payload timestamp seen, per resource
        self._last = -math.inf
        self.scrapes = 0

    async def read(self) -> list[HeadroomSample]:
        """Scrape once, unless the last scrape is younger than ``min_interval`` (then ``[]``).

        Raises:
            TelemetryUnavailableError: refused, timed out (``timeout`` bounds the whole scrape), or
                an HTTP error status.
            TelemetryFormatError: as `samples_from_exposition`; a payload over ``max_bytes``, or
                compressed.
        """
        if self._clock.now() - self._last < self._min_interval:
            return []
        self._last = self._clock.now()
        text = await self._fetch()
        self.scrapes += 1
        scraped_at, wall_at = self._clock.now(), self._wall.now()
        # parsed off the loop: a payload near the cap takes a parser tens of milliseconds
        counts: dict[str, float] = {}
        sizes: list[int] = []  # vLLM states its cache's size once the cache is profiled
        readings, errors = await asyncio.to_thread(
            _each_reading, text, self.url, self._max_num_seqs, counts, sizes
        )
        self.reported = counts
        if self.kv_capacity is None and sizes:
            self.kv_capacity = min(sizes)
        fresh = []
        for resource, headroom, stamp in readings:
            if stamp is not None:
                problem = self._stamp_problem(resource, stamp, wall_at)
                if problem == _AGAIN:
                    continue  # the exporter's old reading again (module doc)
                if problem:
                    errors.append(TelemetryFormatError(problem, source=self.url, field=resource))
                    continue
                self._stamps[resource] = stamp
            fresh.append(HeadroomSample(resource, headroom, _placed(stamp, scraped_at, wall_at)))
        if errors and not fresh:
            raise errors[0]
        self._errors.extend(errors)
        return fresh

    def take_errors(self) -> list[TelemetryFormatError]:
        """The series refused by the reads since the last call, beside valid ones (then cleared)."""
        errors, self._errors = self._errors, []
        return errors

    def _stamp_problem(self, resource: str, stamp: float, wall_at: float) -> str:
        """Why a payload timestamp is refused (``""``: it is fine; `_AGAIN`: seen before)."""
        last = self._stamps.get(resource)
        if last == stamp:
            return _AGAIN
        if stamp - wall_at > self.max_skew:
            return f"stamped {stamp - wall_at:.3g} s ahead of this clock (bound {self.max_skew:g} s)"
        if wall_at - stamp > self.max_age:
            return f"stamped {wall_at - stamp:.3g} s in the past (bound {self.max_age:g} s)"
        if last is not None and stamp < last:
            return f"stamped {last - stamp:.3g} s before the previous reading: time went backwards"
        return ""

    async def _fetch(self) -> str:
        """The exposition text: at most ``max_bytes``, uncompressed, within ``timeout`` in all."""
        import httpx

        try:
            async with asyncio.timeout(self._timeout), contextlib.AsyncExitStack() as stack:
                client = self._client
                if client is None:
                    client = await stack.enter_async_context(httpx.AsyncClient(timeout=self._timeout))
                answer = await stack.enter_async_context(
                    client.stream("GET", self.url, headers=_IDENTITY, timeout=self._timeout)
                )
                if answer.status_code >= 400:
                    raise TelemetryUnavailableError(f"HTTP {answer.status_code}", source=self.url)
                return await self._body(answer)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise TelemetryUnavailableError(f"{type(exc).__name__}: {exc}", source=self.url) from None

    async def _body(self, answer: Any) -> str:
        """The raw bytes as they came (never inflated: a gzip bomb stays small), up to the cap."""
        encoding = answer.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise TelemetryFormatError(
                f"a {encoding!r} body was sent though identity was asked for (never inflated)",
                source=self.url,
            )
        declared = answer.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise _too_large(self.url, self.max_bytes)
        parts, size = [], 0
        async for chunk in answer.aiter_raw():
            size += len(chunk)
            if size > self.max_bytes:
                raise _too_large(self.url, self.max_bytes)
            parts.append(chunk)
        try:
            return b"".join(parts).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TelemetryFormatError(f"not UTF-8 text (byte {exc.start})", source=self.url) from None


def _too_large(url: str, cap: int) -> TelemetryFormatError:
    return TelemetryFormatError(f"the exposition is larger than {cap:,} bytes: no sample", source=url)


class CallableHeadroomSource:
    """Wraps ``fn() -> {resource: headroom}``; each answer is stamped with the clock's time.

    Raises (from `read`):
        TelemetryFormatError: the answer is not a mapping of names to fractions in [0, 1].
    """

    def __init__(self, fn: Callable[[], Mapping[str, float]], clock: Clock) -> None:
        self._fn = fn
        self._clock = clock

    async def read(self) -> list[HeadroomSample]:
        """Call the function once."""
        answer = self._fn()
        now = self._clock.now()
        if not isinstance(answer, Mapping):
            raise TelemetryFormatError(f"must return a mapping, got {answer!r}", source="<callable>")
        out = []
        for name, value in answer.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise TelemetryFormatError(
                    f"must be in [0, 1], got {value!r}", source="<callable>", field=str(name)
                )
            out.append(HeadroomSample(str(name), float(value), now))
        return out
