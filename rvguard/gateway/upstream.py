"""The gateway's edge to an OpenAI-compatible upstream (vLLM): a `Dispatcher` that passes the stream through.

`rvguard.enforce.VLLMDispatcher` builds its own body and keeps the stream to
itself; a gateway must instead forward the *client's* body (sampling
parameters included) and relay the streamed chunks to the client as they
come. `UpstreamDispatcher` is a `rvguard.enforce.dispatchers.StreamingDispatcher`: the Guard
still owns the slot and the outcome (its task calls ``dispatch``; a cancellation closes the
upstream stream, which makes vLLM abort the sequence), and hands each dispatch the request's
`Stream`: each chunk goes to its ``chunk`` (the gateway's `Channel` to a streaming client) and the
tokens generated so far to its ``tokens`` (relief's S). The fields the floor depends on are forced here, not
taken from the client: ``max_tokens`` (the cap the Guard decided once, from the core's facts:
`rvguard.enforce.dispatchers.decided_cap`), ``priority`` (the true tenant's tier), ``n = 1`` and a
streamed upstream call.

The stream is read by `rvguard.gateway.lean` for a plain-HTTP engine with no proxy and no injected
client (a fraction of httpx's cost a chunk), else by httpx and `rvguard.enforce.stream` (the same
reader as `VLLMDispatcher`); either way each chunk is parsed by `rvguard.enforce.stream.data_chunks`
and folded into the non-streamed answer by its `Assembly`,
which keeps every field of every delta (tool calls, reasoning, refusal,
logprobs, unknown fields): ``Response.raw`` is that answer.

Transport failures become `DispatchError` with 502 (reset/refused) or 504
(timeout); an upstream HTTP error keeps its status as ``status_hint`` and its
own error object as ``error`` (a client's fault is recorded as
``client-error``). Each call carries the upstream API key, when one is set,
and the headers the gateway forwards (``payload["headers"]``: trace context,
request id).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ..clock import Clock, MonotonicClock
from ..contract import Contract
from ..enforce.dispatchers import Response, Stream, decided_cap, fresh_connections
from ..enforce.request import Request
from ..enforce.stream import Assembly, data_chunks, http_error, sse_chunks
from ..errors import DispatchError, MissingExtraError, SpecError
from .lean import Connections, LeanStream, lean_capable
from .outlier import Outlier

if TYPE_CHECKING:
    import httpx

__all__ = [
    "END",
    "Channel",
    "Chunk",
    "Endpoint",
    "UpstreamDispatcher",
    "forced_body",
    "fresh_connections",
    "upstream_url",
]

Endpoint = Literal["completions", "chat"]
PATHS: Mapping[str, str] = MappingProxyType(
    {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
)
# Client fields the gateway decides (never the client): the cap, the rank, one sequence, streaming.
_FORCED_OUT = ("max_completion_tokens", "best_of", "priority", "stream_options")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One streamed upstream event: its raw JSON text, and whether it only carries usage."""

    data: str
    usage_only: bool


class _End:
    __slots__ = ()

    def __repr__(self) -> str:
        return "END"


END = _End()


class Channel:
    """Chunks of one request on their way to its client; `END` once the Guard has its outcome.

    Unbounded, but a request yields at most ``output_cap`` + 2 chunks, so memory
    is O(output_cap) per live streaming request.
    """

    __slots__ = ("_q",)

    def __init__(self) -> None:
        self._q: asyncio.Queue[Chunk | _End] = asyncio.Queue()

    def put(self, item: Chunk | _End) -> None:
        """Queue a chunk (or `END`)."""
        self._q.put_nowait(item)

    def chunk(self, data: str, usage_only: bool) -> None:
        """Queue one streamed event (a `Stream.chunk` callback: the Guard hands it to the dispatch)."""
        self._q.put_nowait(Chunk(data, usage_only))

    async def get(self) -> Chunk | _End:
        """The next chunk, or `END`."""
        return await self._q.get()


def forced_body(body: Mapping[str, Any], *, max_tokens: int, priority: int | None) -> dict[str, Any]:
    """The client's body with the fields the floor depends on forced (see module doc).

    ``priority=None`` sends none (the client's is dropped all the same): for an
    engine not started with ``--scheduling-policy priority``, which refuses any.
    """
    out = {k: v for k, v in body.items() if k not in _FORCED_OUT}
    out.update(max_tokens=max_tokens, n=1, stream=True, stream_options={"include_usage": True})
    if priority is not None:
        out["priority"] = priority
    return out


def _tokens(chunk: Mapping[str, Any]) -> int:
    """Tokens one streamed chunk carries: its ``token_ids`` when the engine sends them, else one
    per choice with text (vLLM streams a token a chunk)."""
    n = 0
    for choice in chunk.get("choices") or ():
        ids = choice.get("token_ids")
        delta = choice.get("delta") or {}
        n += len(ids) if isinstance(ids, list) else int(bool(choice.get("text") or delta.get("content")))
    return n


def _closed(closing: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
    """A done callback: forget the closing task (a close that failed loses nothing: the answer is in)."""

    def done(task: asyncio.Task[None]) -> None:
        closing.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failed close is not an error of the request

    return done


def upstream_url(url: str) -> str:
    """``url`` without a trailing slash, if it is an http(s) URL with a host; else `SpecError`.

    Checked at start-up: a bad upstream would otherwise turn every request,
    entitled ones included, into a ``fail``.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(
            f"upstream must be an http(s) URL with a host, got {url!r}", field="upstream", value=url
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError as err:
        raise SpecError(f"upstream {url!r}: {err}", field="upstream", value=url) from None
    return url.rstrip("/")


class UpstreamDispatcher:
    """POSTs the client's (forced) body upstream, streams, relays chunks, returns a `Response`.

    A reusable unit: one engine, one HTTP client; the gateway holds one (a fleet, several).

    Args:
        base_url: the upstream, e.g. ``http://127.0.0.1:8000``.
        contract: gives the output cap and the tenants' tiers.
        client: an ``httpx.AsyncClient`` to reuse (else one is created and owned).
        connect_timeout, read_timeout: seconds (a silent upstream fails after ``read_timeout``).
        clock: for the client-side timings.
        send_priority: send the tenant's tier as vLLM's ``priority`` (needs an engine started
            with ``--scheduling-policy priority``; off: none is sent).
        api_key: sent as ``Authorization: Bearer`` on every upstream call (an engine run with
            ``--api-key``); ``None``: none.

    ``request.payload`` holds ``endpoint`` (``completions``|``chat``), ``body``
    (the client's JSON object) and optionally ``headers`` (forwarded as they
    are). ``Response.raw`` is the answer in the non-streamed shape, as
    `rvguard.enforce.stream.Assembly` folds it from the stream.
    """

    def __init__(
        self,
        base_url: str,
        *,
        contract: Contract,
        client: httpx.AsyncClient | None = None,
        connect_timeout: float = 2.0,
        read_timeout: float = 60.0,
        clock: Clock | None = None,
        send_priority: bool = True,
        api_key: str | None = None,
    ) -> None:
        try:
            import httpx
        except ImportError:  # pragma: no cover - the gateway extra brings httpx
            raise MissingExtraError("httpx", "gateway") from None
        self._httpx = httpx
        self.send_priority = send_priority
        self.base_url = base_url.rstrip("/")
        self._contract = contract
        self._owned = client is None
        self._lean = client is None and lean_capable(self.base_url)  # the lean reader (`lean`)
        self._connections = Connections() if self._lean else None  # its kept-alive connections
        self._timeouts = (connect_timeout, read_timeout)
        timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        limits = fresh_connections()
        self.client = client if client is not None else httpx.AsyncClient(timeout=timeout, limits=limits)
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._auth: Mapping[str, str] = MappingProxyType(
            {"authorization": f"Bearer {api_key}"} if api_key else {}
        )
        self._closing: set[asyncio.Task[None]] = set()  # finished streams' connections being closed
        self.outlier: Outlier | None = None  # told each dispatch's outcome (`rvguard.gateway.outlier`)

    async def aclose(self) -> None:
        """Close the HTTP client if this dispatcher created it, and the kept connections (a trial under
        way stops first)."""
        if self.outlier is not None:
            await self.outlier.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        if self._connections is not None:
            await self._connections.aclose()
        if self._owned:
            await self.client.aclose()

    def body(self, request: Request) -> dict[str, Any]:
        """The upstream body: the client's, with the Guard's cap (`decided_cap`), tier, n and
        streaming forced."""
        client_body: Mapping[str, Any] = request.payload.get("body") or {}
        return forced_body(
            client_body,
            max_tokens=decided_cap(request),
            priority=self._contract.tier_of(request.tenant) if self.send_priority else None,
        )

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        return {**(extra or {}), **self._auth}

    async def dispatch(self, request: Request, *, stream: Stream | None = None) -> Response:
        """Serve ``request`` upstream, telling ``stream`` each chunk and the tokens generated so far
        (`StreamingDispatcher`); raise `DispatchError` (502/504/upstream status) on failure. The
        outcome (not a cancellation) is told to the upstream's `Outlier`, when it has one."""
        if self.outlier is None:
            return await self._dispatch(request, stream)
        try:
            answer = await self._dispatch(request, stream)
        except DispatchError as err:
            self.outlier.failed(err, PATHS[str(request.payload.get("endpoint", "completions"))])
            raise
        self.outlier.succeeded()
        return answer

    async def _dispatch(self, request: Request, stream: Stream | None) -> Response:
        httpx = self._httpx
        url = self.base_url + PATHS[str(request.payload.get("endpoint", "completions"))]
        headers = self._headers(request.payload.get("headers"))
        if self._lean:
            return await self._dispatch_lean(request, url, headers, stream)
        sent = self.client.build_request("POST", url, json=self.body(request), headers=headers)
        start = self._clock.now()
        try:
            resp = await self.client.send(sent, stream=True)
            try:
                if resp.status_code != 200:
                    raise http_error(resp.status_code, await resp.aread())
                answer = await self._relay(stream, sse_chunks(resp), resp.status_code, start)
            except BaseException:
                await resp.aclose()
                raise
        except httpx.TimeoutException as exc:
            raise DispatchError(f"upstream timeout: {type(exc).__name__}", status_hint=504) from exc
        except httpx.TransportError as exc:
            raise DispatchError(f"upstream transport: {type(exc).__name__}: {exc}", status_hint=502) from exc
        self._close_later(resp)  # the answer is whole at [DONE]: the Guard frees the slot before the close
        return answer

    async def _dispatch_lean(
        self, request: Request, url: str, headers: Mapping[str, str], stream: Stream | None
    ) -> Response:
        """`dispatch` through `lean.LeanStream` (a plain-HTTP engine, no proxy, no client injected)."""
        connect, read = self._timeouts
        body, pool = self.body(request), self._connections
        lean = LeanStream(url, body, headers, connect=connect, read=read, pool=pool)
        start = self._clock.now()
        async with lean:
            await lean.head()
            return await self._relay(stream, data_chunks(lean.events()), 200, start)

    def _close_later(self, resp: httpx.Response) -> None:
        """Close a finished stream's connection in the background (the next dispatch need not wait)."""
        task = asyncio.ensure_future(resp.aclose())
        self._closing.add(task)
        task.add_done_callback(_closed(self._closing))

    async def _relay(
        self,
        stream: Stream | None,
        chunks: AsyncIterator[tuple[str, Mapping[str, Any]]],
        status: int,
        start: float,
    ) -> Response:
        answer = Assembly()
        first: float | None = None
        generated = 0
        told, counter = (None, None) if stream is None else (stream.chunk, stream.tokens)
        async for data, chunk in chunks:  # malformed, {"error": …}, no [DONE]: DispatchError
            if answer.add(chunk) and first is None:
                first = self._clock.now() - start
            if counter is not None and chunk.get("choices"):
                generated += _tokens(chunk)
                counter(generated)
            if told is not None:
                told(data, not chunk.get("choices"))
        usage = answer.usage
        return Response(
            text=answer.text,
            output_tokens=usage.get("completion_tokens"),
            prompt_tokens=usage.get("prompt_tokens"),
            first_token=first,
            total=self._clock.now() - start,
            status=status,
            raw=MappingProxyType(answer.answer()),
        )

    async def count_prompt_tokens(
        self, endpoint: Endpoint, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> int:
        """The prompt's size in the upstream's own tokens, for token credits (vLLM's ``POST /tokenize``).

        A completions prompt given as token ids is counted without a call. Raises
        `DispatchError` when the upstream cannot say (no ``/tokenize``, an error,
        a transport failure): the credit a request spends must not be guessed.
        """
        prompt = body.get("prompt")
        if isinstance(prompt, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
            return len(prompt)
        ask: dict[str, Any] = {"model": body.get("model")}
        if endpoint == "chat":
            ask["messages"] = body.get("messages")
        else:
            ask["prompt"] = prompt
        status, data = await self.get_json("/tokenize", ask, headers=headers)
        count = data.get("count") if isinstance(data, Mapping) else None
        if status != 200 or not isinstance(count, int):
            raise DispatchError(f"upstream /tokenize answered {status}: {str(data)[:200]}", status_hint=502)
        return count

    async def models(self) -> list[str]:
        """The model ids the upstream serves (``GET /v1/models``); `DispatchError` when it cannot say."""
        status, data = await self.get_json("/v1/models")
        listed = data.get("data") if isinstance(data, Mapping) else None
        if status != 200 or not isinstance(listed, list):
            raise DispatchError(f"upstream /v1/models answered {status}", status_hint=502)
        return [str(m["id"]) for m in listed if isinstance(m, Mapping) and "id" in m]

    async def status_of(self, path: str) -> int:
        """The status of ``GET path`` upstream (a health path: its body is not read as JSON);
        `DispatchError` on transport failure (504: too slow)."""
        httpx = self._httpx
        try:
            resp = await self.client.get(self.base_url + path, headers=self._headers(None))
        except httpx.TimeoutException as exc:
            raise DispatchError(f"upstream timeout: {type(exc).__name__}", status_hint=504) from exc
        except httpx.TransportError as exc:
            raise DispatchError(f"upstream transport: {type(exc).__name__}: {exc}", status_hint=502) from exc
        return resp.status_code

    async def get_json(
        self, path: str, post: Mapping[str, Any] | None = None, *, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        """GET ``path`` upstream (for ``/v1/models``), or POST ``post`` to it; raise `DispatchError` on
        transport failure or a non-JSON answer."""
        httpx = self._httpx
        sent = self._headers(headers)
        try:
            if post is None:
                resp = await self.client.get(self.base_url + path, headers=sent)
            else:
                resp = await self.client.post(self.base_url + path, json=post, headers=sent)
        except httpx.TimeoutException as exc:
            raise DispatchError(f"upstream timeout: {type(exc).__name__}", status_hint=504) from exc
        except httpx.TransportError as exc:
            raise DispatchError(f"upstream transport: {type(exc).__name__}: {exc}", status_hint=502) from exc
        try:
            return resp.status_code, resp.json()
        except ValueError:
            raise DispatchError("upstream answered with non-JSON", status_hint=502) from None
