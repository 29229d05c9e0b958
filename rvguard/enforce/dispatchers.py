"""Dispatchers: the one-method edge between the Guard and a backend (httpx-transport style).

A `Dispatcher` has one coroutine, ``dispatch(request) -> Response``. It does
not catch what it cannot handle: exceptions propagate to the `Guard`, which
turns them into a ``fail`` event and frees the slot. `VLLMDispatcher` maps
transport failures to `DispatchError` with the HTTP status (or 502/504), so
the reason in the trace names what went wrong; a stream that breaks after a
200 (a malformed chunk, an ``error`` chunk, no ``[DONE]``) fails the request
too. It opens one connection per request (`fresh_connections`, shared with
the gateway's httpx calls; the gateway's own streamed reader, `rvguard.gateway.lean`,
keeps its connections alive, with the retry that makes that safe).

A dispatcher that relays the stream as it comes is a `StreamingDispatcher`: the same one method,
with a keyword-only ``stream`` (`Stream`: a callback for each chunk, one for the tokens generated so
far). The Guard gives it one per request — the caller's chunk callback (``Guard.submit(on_chunk=)``,
the gateway's channel to its client) and relief's progress — so nothing is written into a
dispatcher from outside; a plain `Dispatcher` is called with the request alone.

A dispatcher computes no output cap: the Guard caps each request once, from the core's facts
(``RequestFacts.capped_tokens``, the value its ``arrive`` records), and a dispatcher sends the
request's ``max_tokens`` as it is (`decided_cap`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard

from ..clock import Clock, MonotonicClock
from ..contract import Contract
from ..errors import DispatchError, EnforcementError, MissingExtraError
from .request import Request
from .stream import Assembly, http_error, parse_chunk, sse_chunks, sse_data

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CallableDispatcher",
    "DispatchError",
    "Dispatcher",
    "MockDispatcher",
    "Response",
    "Stream",
    "StreamingDispatcher",
    "VLLMDispatcher",
    "decided_cap",
    "failure_reason",
    "fresh_connections",
    "is_streaming",
    "parse_chunk",
    "sse_data",
]


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Response:
    """What a backend returned, with client-side timings (seconds) when measured."""

    text: str = ""
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    first_token: float | None = None
    total: float | None = None
    status: int = 200
    raw: Mapping[str, Any] = field(default_factory=_empty, compare=False, repr=False)


class Dispatcher(Protocol):
    """Sends one admitted request to a backend."""

    async def dispatch(self, request: Request) -> Response:
        """Serve ``request``; raise on failure (never swallow)."""
        ...


#: told one streamed event: its raw JSON text, and whether it carries only usage
ChunkSink = Callable[[str, bool], None]


@dataclass(frozen=True, slots=True)
class Stream:
    """What a `StreamingDispatcher` tells, in order, as one request's stream comes.

    Attributes:
        chunk: each streamed event (its JSON text, usage only or not): the caller's, e.g. the
            gateway's channel to a streaming client; ``None``: nobody reads the chunks.
        tokens: the output tokens generated so far, after each chunk that carries some (relief's S);
            ``None``: nobody counts them.
    """

    chunk: ChunkSink | None = None
    tokens: Callable[[int], None] | None = None


class StreamingDispatcher(Protocol):
    """A `Dispatcher` that can report the stream as it comes (`Stream`)."""

    async def dispatch(self, request: Request, *, stream: Stream | None = None) -> Response:
        """Serve ``request``, telling ``stream`` (if any) each chunk; raise on failure (never swallow)."""
        ...


def is_streaming(dispatcher: Dispatcher) -> TypeGuard[StreamingDispatcher]:
    """True when ``dispatcher.dispatch`` takes the keyword-only ``stream`` of `StreamingDispatcher`
    (read from its signature, once: the Guard asks when it is built)."""
    try:
        params = inspect.signature(dispatcher.dispatch).parameters
    except (TypeError, ValueError):  # a callable without a readable signature: a plain dispatcher
        return False
    param = params.get("stream")
    return param is not None and param.kind is inspect.Parameter.KEYWORD_ONLY


class CallableDispatcher:
    """Wraps any ``async def f(request) -> Response``."""

    def __init__(self, fn: Callable[[Request], Awaitable[Response]]) -> None:
        self._fn = fn

    async def dispatch(self, request: Request) -> Response:
        """Await the wrapped function."""
        return await self._fn(request)


class MockDispatcher:
    """A test backend from a sync or async handler; counts calls."""

    def __init__(self, handler: Callable[[Request], Response | Awaitable[Response]]) -> None:
        self._handler = handler
        self.calls: list[Request] = []

    async def dispatch(self, request: Request) -> Response:
        """Call the handler (awaiting it if it returns an awaitable)."""
        self.calls.append(request)
        out = self._handler(request)
        if inspect.isawaitable(out):
            return await out
        return out


Endpoint = Literal["completions", "chat"]


def decided_cap(request: Request) -> int:
    """The output tokens the Guard decided for ``request``: its ``max_tokens``, which the Guard set
    from the core's facts (or, after a relocation, the budget left). A dispatcher sends it as it is.

    Raises:
        EnforcementError: ``max_tokens`` is unset: the request was not decided by a Guard (500).
    """
    if request.max_tokens is None:
        raise EnforcementError(
            f"request {request.rid!r} has no output cap: a Guard caps every request it dispatches",
            status_hint=500,
        )
    return request.max_tokens


def fresh_connections() -> httpx.Limits:
    """httpx limits that open one connection per request and keep none idle.

    Why not keep-alive: a reused connection can fail a request that was never
    wrong. The server may close an idle connection just as a request is sent
    on it (uvicorn's keep-alive), and httpcore 1.0.9's pool can close an idle
    connection it has just handed to a queued request (encode/httpcore#1110):
    both surface as a bare ``ReadError`` — a lost request the gateway would
    report as an upstream failure, or the load generator as a transport error.
    With no idle connection kept, neither can happen; a loopback or LAN
    connect costs well under a millisecond against a generation's hundreds.
    """
    import httpx

    return httpx.Limits(max_connections=None, max_keepalive_connections=0)


class VLLMDispatcher:
    """vLLM's OpenAI-compatible API over httpx, streaming, with the guard's cap and tier.

    Sends ``max_tokens`` as the Guard capped it (`decided_cap`) and vLLM's ``priority``
    = the true tenant's tier (lower first, as ``--scheduling-policy priority``
    expects), streams with ``stream_options.include_usage`` to time the first
    token and the completion on the client side.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000``.
        model: the served model name.
        contract: gives the tenants' tiers.
        endpoint: ``completions`` (``payload["prompt"]``) or ``chat`` (``payload["messages"]``).
        connect_timeout, read_timeout: seconds.
        client: an ``httpx.AsyncClient`` to reuse (else one is created and owned,
            with `fresh_connections`: one connection per request).
        clock: for the timings (default `MonotonicClock`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        contract: Contract,
        endpoint: Endpoint = "completions",
        connect_timeout: float = 2.0,
        read_timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        try:
            import httpx
        except ImportError:  # pragma: no cover - the http extra is installed in dev
            raise MissingExtraError("httpx", "http") from None
        if endpoint not in ("completions", "chat"):
            raise ValueError(f"endpoint must be 'completions' or 'chat', got {endpoint!r}")
        self._httpx = httpx
        self._url = base_url.rstrip("/") + (
            "/v1/completions" if endpoint == "completions" else "/v1/chat/completions"
        )
        self._model = model
        self._contract = contract
        self._endpoint = endpoint
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._owned = client is None
        limits = fresh_connections()
        self._client = client if client is not None else httpx.AsyncClient(timeout=timeout, limits=limits)
        self._clock: Clock = clock if clock is not None else MonotonicClock()

    async def aclose(self) -> None:
        """Close the HTTP client if this dispatcher created it."""
        if self._owned:
            await self._client.aclose()

    def body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``: the Guard's cap, and the true tier as the priority."""
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": decided_cap(request),
            "priority": self._contract.tier_of(request.tenant),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self._endpoint == "completions":
            body["prompt"] = request.payload.get("prompt", "")
        else:
            body["messages"] = list(request.payload.get("messages", ()))
        return body

    async def dispatch(self, request: Request) -> Response:
        """POST, stream, time; HTTP errors, resets and broken streams raise `DispatchError` (status kept)."""
        httpx = self._httpx
        start = self._clock.now()
        try:
            async with self._client.stream("POST", self._url, json=self.body(request)) as resp:
                if resp.status_code != 200:
                    raise http_error(resp.status_code, await resp.aread())
                return await self._read_stream(resp, start)
        except httpx.TimeoutException as exc:
            raise DispatchError(f"timeout: {type(exc).__name__}", status_hint=504) from exc
        except httpx.TransportError as exc:
            raise DispatchError(f"transport: {type(exc).__name__}: {exc}", status_hint=502) from exc

    async def _read_stream(self, resp: httpx.Response, start: float) -> Response:
        answer = Assembly()
        first: float | None = None
        async for _data, chunk in sse_chunks(resp):
            if answer.add(chunk) and first is None:
                first = self._clock.now() - start
        usage = answer.usage
        return Response(
            text=answer.text,
            output_tokens=usage.get("completion_tokens"),
            prompt_tokens=usage.get("prompt_tokens"),
            first_token=first,
            total=self._clock.now() - start,
            status=resp.status_code,
            raw=MappingProxyType(dict(usage)),
        )


def failure_reason(exc: BaseException) -> str:
    """The ``fail`` reason the Guard records for a dispatch that raised ``exc``.

    ``timeout`` for a `TimeoutError`; a `DispatchError`'s own ``reason`` when it
    names one (``client-error: …`` for a request the backend refused as the
    client's mistake, which SF does not count against the guard); else
    ``<ExceptionType>: <message>``.
    """
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, DispatchError) and exc.reason:
        return exc.reason
    try:
        detail = str(exc)
    except Exception:  # noqa: BLE001 - a backend's unprintable error is still its failure
        detail = "<unprintable>"
    return f"{type(exc).__name__}: {detail}"
