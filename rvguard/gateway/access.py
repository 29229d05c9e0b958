"""Every HTTP exchange: its request id and trace context, and one access line in the log.

`RequestIds` is the gateway's outermost ASGI middleware. For each exchange it
takes or makes the `ForwardedContext` (``x-request-id``, ``traceparent``),
returns ``x-request-id`` on the answer, and, once the answer is sent, writes one
access line (event ``access``) with the request id, method, path, status,
latency, and what the handlers noted in the exchange's `AccessNote`: the
tenant, the rid, the outcome (``completed``, ``rejected``, ``dropped``,
``failed``, ``preempted``, ``cancelled``, or ``refused`` before the Guard) and
its reason. Probes and scrapes (``/healthz``, ``/readyz``, ``/metrics``) are
logged at DEBUG, every other exchange at INFO.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..clock import MonotonicClock
from .wire import ForwardedContext, forwarded_context

__all__ = ["AccessNote", "RequestIds", "access_note", "context_of"]

log = logging.getLogger("rvguard.gateway")
_CONTEXT = "rvguard.context"  # the ASGI scope key holding a request's `ForwardedContext`
_NOTE = "rvguard.access"  # ... and its `AccessNote`
#: paths polled by orchestrators and scrapers: their access lines are DEBUG
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class AccessNote:
    """What the handlers learn about one exchange, for its access line."""

    __slots__ = ("outcome", "reason", "rid", "tenant")

    def __init__(self) -> None:
        self.tenant = ""
        self.rid = ""
        self.outcome = ""
        self.reason = ""

    def refused(self, reason: str) -> None:
        """Answered before the Guard (401, 400, 413, ...)."""
        self.outcome, self.reason = "refused", reason

    def settle(self, task: asyncio.Task[Any]) -> None:
        """The Guard's outcome, from the exchange's finished submit task (a done callback)."""
        if task.cancelled():
            self.outcome, self.reason = "cancelled", "client went away"
            return
        outcome = task.result() if task.exception() is None else None
        if outcome is not None:
            self.outcome, self.reason = str(outcome.status), str(outcome.reason or "")


def context_of(scope: Scope, headers: Any) -> ForwardedContext:
    """The exchange's `ForwardedContext` (made from ``headers`` outside the middleware)."""
    ctx = scope.get(_CONTEXT)
    return ctx if isinstance(ctx, ForwardedContext) else forwarded_context(headers)


def access_note(scope: Scope) -> AccessNote:
    """The exchange's `AccessNote` (a throwaway one outside the middleware)."""
    note = scope.get(_NOTE)
    return note if isinstance(note, AccessNote) else AccessNote()


class RequestIds:
    """ASGI middleware: every HTTP exchange gets its `ForwardedContext`, its ``x-request-id`` and
    its access line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._clock = MonotonicClock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        ctx = forwarded_context(headers)
        note = AccessNote()
        scope[_CONTEXT], scope[_NOTE] = ctx, note
        started = self._clock.now()
        status = [0]
        # both framings (RFC 9112 §6.1: Transfer-Encoding wins, as h11 reads it): answer, then close,
        # since a proxy in front may have framed the body by its Content-Length
        smuggled = "content-length" in headers and "transfer-encoding" in headers
        more = [(b"x-request-id", ctx.request_id.encode())] + (
            [(b"connection", b"close")] if smuggled else []
        )

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                kept = [
                    h for h in message.get("headers", []) if not (smuggled and h[0].lower() == b"connection")
                ]
                message = {**message, "headers": [*kept, *more]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self._log(scope, ctx, note, status[0], self._clock.now() - started)

    def _log(
        self, scope: Scope, ctx: ForwardedContext, note: AccessNote, status: int, seconds: float
    ) -> None:
        path = str(scope.get("path", ""))
        level = logging.DEBUG if path in QUIET_PATHS else logging.INFO
        if not log.isEnabledFor(level):
            return
        method = str(scope.get("method", ""))
        log.log(
            level,
            "%s %s %d",
            method,
            path,
            status,
            extra={
                "event": "access",
                "request_id": ctx.request_id,
                "method": method,
                "path": path,
                "status": status,
                "latency_ms": round(seconds * 1000.0, 3),
                "tenant": note.tenant,
                "rid": note.rid,
                "outcome": note.outcome or ("ok" if status < 400 else "error"),
                "reason": note.reason,
            },
        )
