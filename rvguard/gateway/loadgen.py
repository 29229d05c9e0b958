"""An open-loop load generator for OpenAI-compatible servers: replay a public trace over HTTP.

Open loop: each request is sent at its scheduled time whatever happened to
the previous ones (a closed loop would slow down with the server and hide
overload). The schedule comes from a public arrival trace (`rvguard.io.public`)
time-scaled to a target rate, tenants assigned by a stated rule; each
tenant's requests carry that tenant's API key, so a gateway binds them from
credentials. Bounded by construction: the schedule is finite and every
request has a timeout.

Used by the end-to-end tests and ``benchmarks/bench_gateway.py``; the same
shots can be sent to the gateway or straight to the upstream (pass the
tenant's tier as vLLM's ``priority`` or not, as the baseline requires).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import Clock, MonotonicClock
from ..enforce.dispatchers import sse_data
from ..io.public import FractionRule, TenantRule, read_public, to_arrivals
from .server import kernel_wait
from .upstream import fresh_connections

__all__ = ["Result", "Shot", "replay", "shots_from_trace"]


@dataclass(frozen=True, slots=True)
class Shot:
    """One scheduled request: send time (s from the start), who, how long, streamed or not."""

    t: float
    tenant: str
    max_tokens: int
    stream: bool = False
    prompt: str = "Tell me about the admission floor."


@dataclass(frozen=True, slots=True)
class Result:
    """What one shot got: HTTP status (0 = transport error), times from the start, tokens seen.

    ``sent`` is when the client took the shot up, ``wrote`` when it began writing its request's
    headers (None: never; the start, not the write's end, whose callback can run a loop turn late,
    so the headers reached the kernel no earlier): between the two is the client's own queueing
    (its event loop, its CPU), which no server can see. ``landed`` is when the answer's last bytes reached
    the client's kernel (``done`` less their age there, `rvguard.gateway.server.kernel_wait`;
    None: not known): between it and ``done`` the client was reading late. ``rid`` is the
    gateway's ``x-rvguard-rid`` header (empty when the server sends none).
    """

    shot: Shot
    status: int
    sent: float
    done: float
    tokens: int
    error: str = ""
    rid: str = ""
    wrote: float | None = None
    landed: float | None = None

    @property
    def latency(self) -> float:
        """Seconds from sending to the last byte (or the error)."""
        return self.done - self.sent


def shots_from_trace(
    path: str | Path,
    *,
    rate: float,
    limit: int,
    tenant_rule: TenantRule | None = None,
    output_cap: int = 64,
    min_tokens: int = 1,
    stream_every: int = 0,
) -> list[Shot]:
    """The first ``limit`` arrivals of a public trace, time-scaled to ``rate`` req/s.

    Args:
        path: Azure CSV, Mooncake JSONL or BurstGPT CSV (recognised by columns).
        rate: target mean arrival rate (req/s).
        limit: how many arrivals to keep (from the first).
        tenant_rule: tenant per arrival (default `FractionRule(0.5, seed=0)`).
        output_cap: ``max_tokens`` = min(trace output tokens, cap), at least ``min_tokens``.
        stream_every: every k-th shot streams (0: none).
    """
    rows = read_public(path)[:limit]
    arrivals = to_arrivals(rows, rate=rate, tenant_rule=tenant_rule or FractionRule(), output_cap=output_cap)
    t0 = arrivals[0].t if arrivals else 0.0
    return [
        Shot(
            t=a.t - t0,
            tenant=a.tenant,
            max_tokens=max(min_tokens, a.max_tokens or min_tokens),
            stream=stream_every > 0 and i % stream_every == stream_every - 1,
        )
        for i, a in enumerate(arrivals)
    ]


async def _send(
    client: Any,
    url: str,
    shot: Shot,
    body: dict[str, Any],
    headers: Mapping[str, str],
    clock: Clock,
    t0: float,
) -> Result:
    import httpx

    sent = clock.now() - t0
    tokens, at = 0, _Stamps(clock, t0)
    try:
        async with client.stream(
            "POST", url, json=body, headers=headers, extensions={"trace": at.hook}
        ) as resp:
            tokens = await _tokens(resp, shot.stream)
        rid = resp.headers.get("x-rvguard-rid", "")
        done = at.read if at.read is not None else clock.now() - t0
        return Result(shot, resp.status_code, sent, done, tokens, rid=rid, wrote=at.wrote, landed=at.landed)
    except httpx.HTTPError as exc:
        return Result(shot, 0, sent, clock.now() - t0, tokens, _describe(exc), wrote=at.wrote)


class _Stamps:
    """httpcore's trace hook for one request: when it began writing its headers, when the answer's
    last bytes were read, and when they had reached the kernel (their age there at that read)."""

    def __init__(self, clock: Clock, t0: float) -> None:
        self.clock, self.t0 = clock, t0
        self.stream: Any = None
        self.wrote: float | None = None
        self.read: float | None = None
        self.landed: float | None = None

    async def hook(self, name: str, info: Mapping[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            self.stream = info.get("return_value")
        elif name == "http11.send_request_headers.started" and self.wrote is None:
            self.wrote = self.clock.now() - self.t0
        elif name == "http11.receive_response_body.complete":
            self.read = self.clock.now() - self.t0
            self.landed = self.read - kernel_wait(self.stream)


async def _tokens(resp: Any, stream: bool) -> int:
    """Read the whole answer; the completion tokens it carried (0 for an error)."""
    if resp.status_code != 200:
        await resp.aread()
        return 0
    if not stream:
        await resp.aread()
        return int((resp.json().get("usage") or {}).get("completion_tokens") or 0)
    tokens = 0
    async for data in sse_data(resp):  # a JSON error inside the stream is no token
        tokens += '"error"' not in data and "[DONE]" not in data
    return tokens


def _describe(exc: BaseException) -> str:
    """The transport error and what caused it (httpx's own message is often empty)."""
    parts, seen = [], 0
    cur: BaseException | None = exc
    while cur is not None and seen < 4:
        parts.append(f"{type(cur).__name__}: {cur}".rstrip(": "))
        cur, seen = cur.__cause__ or cur.__context__, seen + 1
    return " <- ".join(parts)


async def replay(
    base_url: str,
    shots: Sequence[Shot],
    *,
    model: str,
    keys: Mapping[str, str] | None = None,
    priorities: Mapping[str, int] | None = None,
    timeout: float = 60.0,
    clock: Clock | None = None,
) -> list[Result]:
    """Send every shot at its time to ``base_url``/v1/completions; wait for all; results in shot order.

    Args:
        keys: tenant → API key sent as ``Authorization: Bearer`` (none: no credential).
        priorities: tenant → vLLM ``priority`` to put in the body (for direct-to-upstream runs).
        timeout: per request, seconds.
    """
    import httpx

    clk: Clock = clock if clock is not None else MonotonicClock()
    url = base_url.rstrip("/") + "/v1/completions"
    # a connection per request: a reused one can fail a request with a bare ReadError (see fresh_connections)
    limits = fresh_connections()
    # connect may take the whole budget: on a loaded 2-core machine (an engine on both cores) a
    # 5 s connect limit once failed a request the gateway would have served
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout), limits=limits) as client:
        t0 = clk.now()
        tasks: list[asyncio.Task[Result]] = []
        for shot in shots:
            delay = shot.t - (clk.now() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            body: dict[str, Any] = {"model": model, "prompt": shot.prompt, "max_tokens": shot.max_tokens}
            body.update(stream=shot.stream, ignore_eos=True)
            if priorities is not None:
                body["priority"] = priorities.get(shot.tenant, 0)
            key = (keys or {}).get(shot.tenant)
            headers = {"authorization": f"Bearer {key}"} if key else {}
            tasks.append(asyncio.ensure_future(_send(client, url, shot, body, headers, clk, t0)))
        return list(await asyncio.gather(*tasks))
