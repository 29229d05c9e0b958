"""The guarded OpenAI-compatible gateway: a Starlette ASGI app around one `Guard`.

Theory of operation
-------------------
Each completion request becomes one `Request` for the Guard, whose tenant is
bound by `IdentityBinder` from the credentials alone (`config` module); the
learner proposes, the decision core decides, and the Guard's task calls
`UpstreamDispatcher`, which streams from the upstream and relays each chunk on
the request's `Channel`. The HTTP handler returns a `_PendingAnswer` at
once: an ASGI response that waits for the first chunk or the outcome *while
listening for the client's disconnect*, then answers

* 200 — the stream passed through (``stream: true``) or the assembled JSON;
* 429 + ``Retry-After`` (the next window start) — rejected (learner, excess);
* 401 — no credential bound any tenant (``unauthenticated: reject``);
* 503 — dropped as doomed, or cancelled by shutdown;
* 502/504 — the upstream failed or timed out (an upstream 4xx keeps its status).

A client that goes away (before or during the stream) cancels its submit
task; the Guard then fails the request with reason ``cancelled``, frees its
slot and closes the upstream stream (vLLM aborts the sequence). Every
request that reached the Guard thus has exactly one terminal event in the
trace, which the Guard's sinks write: a line-buffered JSONL file and the
Prometheus `MetricsSink`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..clock import Clock, MonotonicClock
from ..contract import Contract, CreditMode
from ..enforce.core import DispatchPolicy
from ..enforce.dispatch import DispatchError
from ..enforce.guard import Guard, Outcome
from ..enforce.identity import Identity
from ..enforce.learners import Learner
from ..enforce.request import Request
from ..enforce.watch import WatchConfig
from ..errors import EnforcementError, SpecError
from ..events import Event, event_to_dict
from .config import KeysConfig, identity_from_headers
from .metrics import MetricsSink
from .upstream import END, Channel, Chunk, Endpoint, UpstreamDispatcher, upstream_url

__all__ = ["Gateway", "GatewaySettings", "TraceFile", "error_body", "serving"]

#: seconds an idle client connection is kept open; above clients' own expiry (httpx: 5 s) so a
#: client never reuses a connection at the instant the server closes it
KEEP_ALIVE_S = 75


@dataclass(frozen=True)
class GatewaySettings:
    """How the gateway runs (everything but the contract).

    Attributes:
        upstream: the OpenAI-compatible server, e.g. ``http://127.0.0.1:8000``.
        keys: API keys, claim secret, unauthenticated policy.
        learner: the untrusted proposer (``None``: admit everything).
        trace: JSONL file the Guard's events go to (``None``: no trace).
        timeout: seconds a whole upstream call may take (Guard-level).
        connect_timeout, read_timeout: upstream socket timeouts (seconds).
        deferred_drop: drop doomed requests at dispatch time (503).
        drain_timeout: seconds shutdown waits for live requests.
        watch: the assumption watch (``None``: off).
        send_priority: send the tier as vLLM's ``priority`` (the engine must run
            ``--scheduling-policy priority``); the gateway dispatches by tier either way.
        dispatch_policy: the core's dispatch order: ``priority`` (tier, then arrival) or
            ``fifo`` (arrival only: the study's ablation, for experiments).
    """

    upstream: str
    keys: KeysConfig = field(default_factory=KeysConfig)
    learner: Learner | None = None
    trace: str | Path | None = None
    timeout: float | None = 120.0
    connect_timeout: float = 2.0
    read_timeout: float = 60.0
    deferred_drop: bool = False
    drain_timeout: float = 10.0
    watch: WatchConfig | None = None
    send_priority: bool = True
    dispatch_policy: DispatchPolicy = "priority"

    def __post_init__(self) -> None:
        upstream_url(self.upstream)
        seconds = {
            "timeout": self.timeout,
            "connect_timeout": self.connect_timeout,
            "read_timeout": self.read_timeout,
            "drain_timeout": self.drain_timeout,
        }
        for name, value in seconds.items():
            if value is None and name == "timeout":
                continue
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise SpecError(
                    f"{name} must be a positive number of seconds, got {value!r}", field=name, value=value
                )


class TraceFile:
    """A Guard sink writing one JSON object a line, line-buffered (a crash loses at most one line)."""

    def __init__(self, path: str | Path) -> None:
        self._out: IO[str] = open(path, "w", encoding="utf-8", newline="\n", buffering=1)  # noqa: SIM115

    def __call__(self, event: Event) -> None:
        """Append ``event``."""
        self._out.write(json.dumps(event_to_dict(event), separators=(",", ":"), allow_nan=False) + "\n")

    def close(self) -> None:
        """Flush and close."""
        self._out.close()


def error_body(status: int, message: str, **extra: Any) -> dict[str, Any]:
    """An OpenAI-style error object with rvguard's fields (``reason``, ``rid``, ...)."""
    return {"error": {"message": message, "type": "rvguard_error", "code": status, **extra}}


class _BadRequest(Exception):
    """A malformed client body (answered 400 before it reaches the Guard)."""


def _validate(body: Any, endpoint: Endpoint) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _BadRequest("the body must be a JSON object")
    need = "prompt" if endpoint == "completions" else "messages"
    if need not in body:
        raise _BadRequest(f"'{need}' is required")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise _BadRequest("'stream' must be a boolean")
    for key in ("n", "best_of"):
        if body.get(key) not in (None, 1):
            raise _BadRequest(f"'{key}' must be 1: each request holds one slot")
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise _BadRequest(f"'{key}' must be a non-negative integer")
    return body


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    v = body.get("max_tokens")
    return v if v is not None else body.get("max_completion_tokens")


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _PendingAnswer(Response):
    """An ASGI response that waits for the Guard while watching for the client's disconnect."""

    def __init__(self, gateway: Gateway, task: asyncio.Task[Outcome], channel: Channel, body: dict[str, Any]):
        super().__init__(status_code=200)
        self._gw = gateway
        self._task = task
        self._channel = channel
        self._body = body
        self._rid = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        listener = asyncio.ensure_future(_disconnected(receive))
        runner = asyncio.ensure_future(self._run(send))
        try:
            await asyncio.wait({listener, runner}, return_when=asyncio.FIRST_COMPLETED)
            if runner.done():
                runner.result()
        finally:
            for t in (listener, runner):
                t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            self._task.cancel()  # a no-op once the outcome is in; else the Guard fails it "cancelled"
            self._gw.forget(self._task)

    async def _run(self, send: Send) -> None:
        first = await self._channel.get()
        if isinstance(first, Chunk) or self._outcome().status == "completed":
            await self._gw.send_success(send, self._body, first, self._channel, self._task)
            return
        await self._gw.render_outcome(self._outcome(), self._body)(
            {"type": "http"},
            _no_receive,
            send,  # a plain Response ignores both
        )

    def _outcome(self) -> Outcome:
        if self._task.cancelled():
            return Outcome(self._gw.rid_of(self._task), "failed", "cancelled")
        return self._task.result()


async def _no_receive() -> dict[str, Any]:  # pragma: no cover - never called by plain responses
    return {"type": "http.disconnect"}


class Gateway:
    """One contract, one upstream, one Guard; ``app`` is the ASGI application.

    Args:
        contract: the contract to enforce.
        settings: upstream, keys, learner, trace, timeouts.
        clock: the Guard's clock (default `MonotonicClock`: the start is the contract's epoch).
        registry: Prometheus registry (default a fresh one).
    """

    def __init__(
        self,
        contract: Contract,
        settings: GatewaySettings,
        *,
        clock: Clock | None = None,
        registry: Any = None,
    ) -> None:
        from prometheus_client import CollectorRegistry

        self.contract = contract
        self.settings = settings
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self.dispatcher = UpstreamDispatcher(
            settings.upstream,
            contract=contract,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            clock=self.clock,
            send_priority=settings.send_priority,
        )
        self._binder = settings.keys.binder(contract)
        self.metrics = MetricsSink(contract, registry if registry is not None else CollectorRegistry())
        sinks: list[Any] = [self.metrics]
        if settings.trace is not None:
            sinks.insert(0, TraceFile(settings.trace))
        self.guard = Guard(
            contract,
            self.dispatcher,
            learner=settings.learner,
            sinks=sinks,
            clock=self.clock,
            binder=self._binder,
            timeout=settings.timeout,
            drain_timeout=settings.drain_timeout,
            deferred_drop=settings.deferred_drop,
            watch=settings.watch,
            dispatch_policy=settings.dispatch_policy,
        )
        self.metrics.watch_guard(self.guard)
        self._ids = itertools.count()
        self._tasks: dict[asyncio.Task[Outcome], str] = {}
        self.app = Starlette(routes=self._routes(), lifespan=self._lifespan)

    def _routes(self) -> list[Route]:
        return [
            Route("/v1/completions", self._completions, methods=["POST"]),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/metrics", self._metrics, methods=["GET"]),
            Route("/healthz", self._healthz, methods=["GET"]),
        ]

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with self.guard:  # on exit: drain live requests, then fail what is left ("shutdown")
            yield
        await self.dispatcher.aclose()

    # -- endpoints -------------------------------------------------------------
    async def _completions(self, http: HttpRequest) -> Response:
        return await self._serve(http, "completions")

    async def _chat(self, http: HttpRequest) -> Response:
        return await self._serve(http, "chat")

    async def _serve(self, http: HttpRequest, endpoint: Endpoint) -> Response:
        try:
            body = _validate(json.loads(await http.body() or b"null"), endpoint)
        except (ValueError, _BadRequest) as err:
            return JSONResponse(error_body(400, f"bad request: {err}"), status_code=400)
        identity = identity_from_headers(http.headers)
        binding = self._binder.bind(identity)  # claim expiry: the binder's wall clock (Unix time)
        if not binding.authenticated:
            self.metrics.unauthenticated.inc()
        prompt_tokens = None
        if binding.tenant is not None and self._counts_prompt(binding.tenant):
            try:
                prompt_tokens = await self.dispatcher.count_prompt_tokens(endpoint, body)
            except DispatchError as err:  # before arrival: the request never reaches the Guard
                message = f"cannot count the prompt's tokens for token credits: {err}"
                return JSONResponse(error_body(502, message), status_code=502)
        rid = f"g{next(self._ids)}"
        payload = {"endpoint": endpoint, "body": body}
        request = Request(
            rid, "", 0.0, prompt_tokens=prompt_tokens, max_tokens=_max_tokens(body), payload=payload
        )
        channel = Channel()
        if body.get("stream") is True:
            self.dispatcher.channels[rid] = channel
        task = asyncio.ensure_future(self._submit(request, identity))
        task.add_done_callback(lambda _t: channel.put(END))
        self._tasks[task] = rid
        return _PendingAnswer(self, task, channel, body)

    async def _submit(self, request: Request, identity: Identity) -> Outcome:
        try:
            return await self.guard.submit(request, identity)
        except EnforcementError as err:  # the guard is closed (503), or refused the request
            return Outcome(request.rid, "failed", str(err), error=err)

    def _counts_prompt(self, tenant: str) -> bool:
        """True when a request of ``tenant`` spends prompt tokens: token credits, a prompt weight, a floor."""
        c = self.contract
        spec = c.tenants.get(tenant)
        return (
            c.credit is CreditMode.TOKENS and c.token_weights.prompt > 0 and spec is not None and spec.floored
        )

    def rid_of(self, task: asyncio.Task[Outcome]) -> str:
        """The rid an HTTP exchange's submit task carries."""
        return self._tasks.get(task, "")

    def forget(self, task: asyncio.Task[Outcome]) -> None:
        """Drop the bookkeeping of a finished HTTP exchange."""
        rid = self._tasks.pop(task, None)
        if rid is not None:
            self.dispatcher.channels.pop(rid, None)

    async def _models(self, http: HttpRequest) -> Response:
        try:
            status, data = await self.dispatcher.get_json("/v1/models")
        except DispatchError as err:
            return JSONResponse(error_body(err.status_hint, str(err)), status_code=err.status_hint)
        return JSONResponse(data, status_code=status)

    async def _metrics(self, http: HttpRequest) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def _healthz(self, http: HttpRequest) -> Response:
        s = self.guard.statistics()
        return JSONResponse(
            {"status": "ok", "live": s.live, "in_flight": s.in_flight, "queue_depth": s.queue_depth}
        )

    # -- answers ---------------------------------------------------------------
    def render_outcome(self, outcome: Outcome, body: Mapping[str, Any]) -> Response:
        """The HTTP answer for an outcome (a completed one as the assembled JSON)."""
        headers = {"x-rvguard-rid": outcome.rid}
        if outcome.status == "completed":
            return JSONResponse(_assemble(outcome, body), headers=headers)
        status, extra = self._failure(outcome)
        if status == 401:
            headers["www-authenticate"] = "Bearer"
        if status == 429:
            now = self.clock.now()
            nxt = self.contract.window_start(self.contract.window_index(now) + 1)
            headers["retry-after"] = str(max(1, math.ceil(nxt - now)))
            extra.update(retry_after=nxt - now, next_window_start=nxt)
        message = f"{outcome.status}: {outcome.reason}" if outcome.reason else outcome.status
        return JSONResponse(
            error_body(status, message, reason=outcome.reason, rid=outcome.rid, **extra),
            status_code=status,
            headers=headers,
        )

    def _failure(self, outcome: Outcome) -> tuple[int, dict[str, Any]]:
        if outcome.status == "rejected":
            return (401 if outcome.reason == "unauthenticated" else 429), {"type": "rvguard_rejected"}
        if outcome.status == "dropped":
            return 503, {"type": "rvguard_dropped"}
        err = outcome.error
        if isinstance(err, TimeoutError):
            return 504, {"type": "upstream_timeout"}
        if isinstance(err, EnforcementError):
            hint = err.status_hint
            status = hint if hint in (504, 503) or 400 <= hint < 500 else 502
            return status, {"type": "upstream_error"}
        if outcome.reason in ("cancelled", "shutdown"):
            return 503, {"type": "rvguard_cancelled"}
        return 502, {"type": "upstream_error"}

    async def send_success(
        self,
        send: Send,
        body: Mapping[str, Any],
        first: Chunk | object,
        channel: Channel,
        task: asyncio.Task[Outcome],
    ) -> None:
        """Answer 200: the relayed stream, or (not streaming) the assembled JSON once complete."""
        if body.get("stream") is not True:
            await self.render_outcome(task.result(), body)({"type": "http"}, _no_receive, send)
            return
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        headers.append((b"x-rvguard-rid", self.rid_of(task).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        item = first
        while isinstance(item, Chunk):
            if usage or not item.usage_only:
                await send(
                    {
                        "type": "http.response.body",
                        "body": f"data: {item.data}\n\n".encode(),
                        "more_body": True,
                    }
                )
            item = await channel.get()
        outcome = task.result() if not task.cancelled() else Outcome(self.rid_of(task), "failed", "cancelled")
        if outcome.status == "completed":
            tail = b"data: [DONE]\n\n"
        else:
            status, extra = self._failure(outcome)
            err = error_body(status, f"{outcome.status}: {outcome.reason}", reason=outcome.reason, **extra)
            tail = f"data: {json.dumps(err)}\n\n".encode()
        await send({"type": "http.response.body", "body": tail, "more_body": False})


def _assemble(outcome: Outcome, body: Mapping[str, Any]) -> dict[str, Any]:
    """The non-streamed OpenAI answer, from what the upstream streamed."""
    resp = outcome.response
    raw: Mapping[str, Any] = resp.raw if resp is not None else {}
    text = resp.text if resp is not None else ""
    chat = "messages" in body
    logprobs = raw.get("logprobs")  # folded from the stream's chunks (None unless the client asked)
    choice: dict[str, Any] = {"index": 0, "logprobs": logprobs, "finish_reason": raw.get("finish_reason")}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": raw.get("id") or f"{'chatcmpl' if chat else 'cmpl'}-{outcome.rid}",
        "object": "chat.completion" if chat else "text_completion",
        "created": raw.get("created", 0),
        "model": raw.get("model") or body.get("model", ""),
        "choices": [choice],
        "usage": dict(raw.get("usage") or {}),
    }


@contextlib.asynccontextmanager
async def serving(app: Any, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn in the current event loop; yields its base URL (port 0: ephemeral).

    For tests and benchmarks: the server stops (gracefully, lifespan included) on exit.
    """
    import uvicorn

    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_S
    )
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    for _ in range(1000):  # ≤ 10 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if not server.started:
        server.should_exit = True
        await task
        raise EnforcementError(f"uvicorn did not start on {host}:{port}", status_hint=500)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        await task
