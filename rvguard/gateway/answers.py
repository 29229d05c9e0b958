"""How the gateway answers a request the Guard decided: the status, the body, the headers.

* completed — 200: the relayed stream, or the upstream's answer in the
  non-streamed shape (`rvguard.enforce.stream.Assembly`: every field kept);
* rejected — 429 + ``retry-after-ms``/``retry-after`` to the next window start;
* dropped as doomed — 503 + ``x-should-retry: false`` (a retry would be doomed too);
* cancelled or shut down — 503 (a retry, elsewhere, can help);
* held by the redline past its hold limit on a stale sample (``redline-stale``), or longer than
  rationed relief's hold bound (``hold-bound``) — 503 + ``retry-after`` and ``x-should-retry: true``;
* preempted (a running surplus request stopped to shed load) — 503 + ``retry-after-ms``/``retry-after``
  (the Guard's retry hint) and ``x-should-retry: true``; mid-stream, the same error object as an SSE
  event, after which the stream ends (no ``[DONE]``): the client retries, it never hangs;
* timed out — 504; the upstream failed — 502 (its 503/504 kept);
* the upstream refused the request as the client's mistake — its own 4xx and its
  own error object, relayed as they came, + ``x-should-retry: false``;
* the upstream refused the gateway's own credentials (401/403/407) — 502, the
  client's key being fine; the engine's 408/429 — 503 (capacity, not the client).

Every answer to a floored tenant carries its ``x-ratelimit-*`` headers (`wire`), read from the
decision core's own ledger of the floor credit admitted in the window (`FloorLedger`): the count
that decides admission is the count the client is told.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from ..clock import Clock
from ..contract import Contract, CreditMode
from ..enforce.guard import Outcome
from ..enforce.watching import FloorLedger
from ..errors import DispatchError
from ..events import CLIENT_ERROR
from .reasons import ANSWERS, Reason, Retry, classify
from .upstream import Channel, Chunk
from .wire import error_body, rate_limit_headers, relayed, retry_headers

#: the ``fail`` reason of a request whose client hung up before its answer was out (SF exempts it)
DISCONNECT = f"{CLIENT_ERROR}: disconnect"

__all__ = ["DISCONNECT", "Answers", "PendingAnswer", "outcome_of"]

#: the retry headers that do not depend on the outcome or the clock
_FIXED: Mapping[str, Mapping[str, str]] = {
    "none": {},
    "never": {"x-should-retry": "false"},
    "soon": retry_headers(1.0, retry=True),
    "later": retry_headers(1.0),
    "authenticate": {"www-authenticate": "Bearer"},
}


def outcome_of(task: asyncio.Task[Outcome], rid: str) -> Outcome:
    """A finished submit task's outcome (a cancelled one: failed, ``cancelled``)."""
    if task.cancelled():
        return Outcome(rid, "failed", "cancelled")
    return task.result()


class Answers:
    """Builds the HTTP answers of one gateway (see module doc).

    Args:
        contract: the contract (floors, window, credit mode).
        clock: the Guard's clock.
        ledger: the floor credits used per tenant and window (the Guard's `DecisionCore`).
    """

    def __init__(self, contract: Contract, clock: Clock, ledger: FloorLedger) -> None:
        self._contract = contract
        self._clock = clock
        self._ledger = ledger

    def _next_window(self) -> float:
        now = self._clock.now()
        c = self._contract
        return c.window_start(c.window_index(now) + 1) - now

    def limit_headers(self, tenant: str | None) -> dict[str, str]:
        """``x-ratelimit-*`` of a floored tenant's credits in this window (none for other tenants)."""
        spec = self._contract.tenants.get(tenant or "")
        if spec is None or not spec.floored or tenant is None:
            return {}
        unit = "tokens" if self._contract.credit is CreditMode.TOKENS else "requests"
        used = self._ledger.floor_used(tenant, self._clock.now())
        return rate_limit_headers(
            unit=unit, limit=spec.floor, remaining=spec.floor - used, reset=self._next_window()
        )

    def render(self, outcome: Outcome, body: Mapping[str, Any], tenant: str | None) -> Response:
        """The whole HTTP answer for an outcome (a completed one as the non-streamed JSON)."""
        headers = {"x-rvguard-rid": outcome.rid, **self.limit_headers(tenant)}
        if outcome.status == "completed":
            return JSONResponse(_assemble(outcome, body), headers=headers)
        status, err, more = self.failure(outcome)
        return JSONResponse(err, status_code=status, headers={**headers, **more})

    def failure(self, outcome: Outcome) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Status, OpenAI error body and extra headers of an outcome that is not a completion
        (`reasons.ANSWERS`, the one table)."""
        reason = classify(outcome)
        spec = ANSWERS[reason]
        message = f"{outcome.status}: {outcome.reason}" if outcome.reason else outcome.status
        err = outcome.error
        upstream = err if isinstance(err, DispatchError) else None
        status = spec.status if spec.status is not None or upstream is None else upstream.status_hint
        if reason is Reason.UPSTREAM_AUTH and upstream is not None:
            message = f"the upstream refused the gateway's credentials (http {upstream.status_hint})"
        if spec.relay and upstream is not None and upstream.error is not None:
            body = relayed(upstream.error)
        else:
            body = error_body(message, spec.type_, code=spec.code_of(outcome))
        return status or 502, body, self._retry(spec.retry, outcome)

    def _retry(self, retry: Retry, outcome: Outcome) -> dict[str, str]:
        """The retry headers a row of the table asks for."""
        if retry == "window":
            return retry_headers(self._next_window())
        if retry == "hint":
            return retry_headers(outcome.retry_after if outcome.retry_after is not None else 1.0, retry=True)
        return dict(_FIXED[retry])

    async def stream(self, send: Send, pending: PendingAnswer, first: object) -> None:
        """Relay the stream (200), then ``[DONE]`` or an error event."""
        body, channel = pending.request_body, pending.channel
        head = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        headers = {"x-rvguard-rid": pending.rid, **self.limit_headers(pending.tenant)}
        head += [(k.encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        item = first
        while isinstance(item, Chunk):
            if usage or not item.usage_only:
                data = f"data: {item.data}\n\n".encode()
                await send({"type": "http.response.body", "body": data, "more_body": True})
            item = await channel.get()
        outcome = outcome_of(pending.task, pending.rid)
        if outcome.status == "completed":
            tail = b"data: [DONE]\n\n"
        else:
            _status, err, _headers = self.failure(outcome)
            tail = f"data: {json.dumps(err)}\n\n".encode()
        await send({"type": "http.response.body", "body": tail, "more_body": False})


def _assemble(outcome: Outcome, body: Mapping[str, Any]) -> dict[str, Any]:
    """The non-streamed OpenAI answer: the upstream's, as folded from its stream (ids filled if absent)."""
    resp = outcome.response
    answer = dict(resp.raw) if resp is not None else {}
    chat = "messages" in body
    answer["id"] = answer.get("id") or f"{'chatcmpl' if chat else 'cmpl'}-{outcome.rid}"
    answer["model"] = answer.get("model") or body.get("model", "")
    answer.setdefault("object", "chat.completion" if chat else "text_completion")
    answer.setdefault("created", 0)
    answer.setdefault("choices", [])
    return answer


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _no_receive() -> dict[str, Any]:  # pragma: no cover - never called by plain responses
    return {"type": "http.disconnect"}


class PendingAnswer(Response):
    """An ASGI response that waits for the Guard while watching for the client's disconnect.

    A client that goes away cancels the submit task: the Guard fails the
    request ``cancelled``, frees its slot and closes the upstream stream.
    """

    def __init__(
        self,
        answers: Answers,
        task: asyncio.Task[Outcome],
        channel: Channel,
        body: dict[str, Any],
        *,
        rid: str,
        tenant: str | None,
    ) -> None:
        super().__init__(status_code=200)
        self._answers = answers
        self.task = task
        self.channel = channel
        self.request_body = body
        self.rid = rid
        self.tenant = tenant

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer once the first chunk or the outcome is in; cancel the request if the client leaves."""
        listener = asyncio.ensure_future(_disconnected(receive))
        runner = asyncio.ensure_future(self._run(send))
        try:
            await asyncio.wait({listener, runner}, return_when=asyncio.FIRST_COMPLETED)
            if runner.done():
                runner.result()
        finally:
            gone = listener.done() and not listener.cancelled()  # the client hung up
            for t in (listener, runner):
                t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            # a no-op once the outcome is in; else the Guard fails it, a hang-up as the client's fault
            self.task.cancel(DISCONNECT if gone else None)

    async def _run(self, send: Send) -> None:
        first = await self.channel.get()  # a chunk (streaming clients only), or END once decided
        if self.request_body.get("stream") is True and (
            isinstance(first, Chunk) or outcome_of(self.task, self.rid).status == "completed"
        ):
            await self._answers.stream(send, self, first)
            return
        response = self._answers.render(outcome_of(self.task, self.rid), self.request_body, self.tenant)
        await response({"type": "http"}, _no_receive, send)  # a plain Response ignores both
