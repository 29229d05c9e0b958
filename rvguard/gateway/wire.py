"""The gateway's side of the OpenAI wire: error bodies, retry headers, request ids and trace context.

Every error the gateway answers has OpenAI's shape, ``{"error": {"message",
"type", "param", "code"}}``, so the SDKs raise their typed exceptions
(``BadRequestError``, ``AuthenticationError``, ``NotFoundError``,
``RateLimitError``, ``InternalServerError``...). An upstream's own error object
is relayed as it came (`relayed`).

Retries (the SDKs read these headers):

* ``retry-after-ms`` — the exact wait, in milliseconds, and ``retry-after`` —
  the same rounded up to whole seconds (for clients that read only that);
* ``x-should-retry: false`` where a retry cannot help (a doomed request, a
  client's mistake), so the SDK's automatic retries do not resubmit it;
* ``x-ratelimit-{limit,remaining,reset}-{requests|tokens}`` — a floored tenant's
  floor credits in the current window (``requests`` with count credits,
  ``tokens`` with token credits) and the time to the next window.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

__all__ = [
    "ForwardedContext",
    "error_body",
    "error_response",
    "forwarded_context",
    "rate_limit_headers",
    "relayed",
    "retry_headers",
]

#: what a client may send as its request id: visible ASCII, at most 128 characters
_REQUEST_ID = re.compile(r"[!-~]{1,128}")
#: W3C trace context, version 00: version-traceid-parentid-flags (lower-case hex, ids not all zero)
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def error_body(
    message: str, type_: str, *, param: str | None = None, code: str | int | None = None
) -> dict[str, Any]:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    type_: str,
    *,
    param: str | None = None,
    code: str | int | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error answer in OpenAI's shape."""
    return JSONResponse(
        error_body(message, type_, param=param, code=code), status_code=status, headers=headers
    )


def relayed(error: Mapping[str, Any]) -> dict[str, Any]:
    """An upstream's own error object, relayed as it came (wrapped as ``{"error": …}``)."""
    return {"error": dict(error)}


def retry_headers(wait: float, *, retry: bool | None = None) -> dict[str, str]:
    """``retry-after-ms`` (exact, rounded up to the millisecond), ``retry-after`` (whole seconds, rounded
    up, at least 1), and ``x-should-retry`` when ``retry`` says so."""
    wait = max(0.0, wait)
    out = {"retry-after-ms": str(math.ceil(wait * 1000)), "retry-after": str(max(1, math.ceil(wait)))}
    if retry is not None:
        out["x-should-retry"] = "true" if retry else "false"
    return out


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``850ms``, ``1.5s``."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    return f"{math.ceil(seconds * 1000) / 1000:g}s"


def rate_limit_headers(*, unit: str, limit: float, remaining: float, reset: float) -> dict[str, str]:
    """``x-ratelimit-*`` for one tenant's floor credits (``unit``: ``requests`` or ``tokens``)."""
    return {
        f"x-ratelimit-limit-{unit}": f"{limit:g}",
        f"x-ratelimit-remaining-{unit}": f"{max(0.0, remaining):g}",
        f"x-ratelimit-reset-{unit}": _duration(max(0.0, reset)),
    }


class ForwardedContext:
    """A request's id and W3C trace context: taken from the client when well formed, else made here.

    ``headers`` are what the gateway forwards upstream (``x-request-id``,
    ``traceparent`` and the client's ``tracestate`` when it sent a valid parent).
    """

    __slots__ = ("request_id", "traceparent", "tracestate")

    def __init__(self, request_id: str, traceparent: str, tracestate: str | None) -> None:
        self.request_id = request_id
        self.traceparent = traceparent
        self.tracestate = tracestate

    @property
    def headers(self) -> dict[str, str]:
        """The headers to forward upstream."""
        out = {"x-request-id": self.request_id, "traceparent": self.traceparent}
        if self.tracestate:
            out["tracestate"] = self.tracestate
        return out


def forwarded_context(headers: Mapping[str, str]) -> ForwardedContext:
    """The client's ``x-request-id`` and ``traceparent`` if well formed; fresh ones when absent or not.

    A fresh ``traceparent`` starts a trace (random trace and parent ids, not sampled);
    ``tracestate`` travels only with the client's own valid ``traceparent``.
    """
    rid = headers.get("x-request-id", "")
    request_id = rid if _REQUEST_ID.fullmatch(rid) else f"req-{secrets.token_hex(12)}"
    parent = headers.get("traceparent", "").strip().lower()
    if _TRACEPARENT.fullmatch(parent):
        return ForwardedContext(request_id, parent, headers.get("tracestate") or None)
    fresh = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-00"
    return ForwardedContext(request_id, fresh, None)
