"""The gateway's edge: a request body read within bounds, parsed strictly, checked before admission.

A client's mistake must cost neither floor credit nor an SF verdict, so what
can be checked here is checked before the request reaches the Guard (400, no
credit spent, no trace event); what only the upstream can judge comes back as
its 4xx and is recorded as a ``client-error`` fail (`rvguard.events.CLIENT_ERROR`).

* Size and time: a body over ``max_body`` bytes is refused with 413 (from its
  ``Content-Length`` before a byte is read, else as soon as it grows past it);
  a body not fully received within ``body_timeout`` seconds, 408.
  (`GuardedH11Protocol` bounds the time a request's headers may take.)
* JSON, strictly: ``NaN``, ``Infinity`` and numbers beyond float range are not
  JSON (400); nesting deeper than `MAX_DEPTH` is refused (400), never a
  ``RecursionError``; text the engine cannot encode (a lone surrogate such as
  ``"\ud800"``, legal JSON escape but no Unicode character) is refused (400),
  so a client cannot spend a floor credit on a request bound to fail.
* One request is one engine sequence: a batched ``prompt`` (a list of strings
  or of token-id lists) is refused (400), as are ``n``/``best_of`` other than
  1; ``max_tokens`` is at least 1 and ``min_tokens`` at most the capped output
  (`check_min_tokens`, with the cap of the request's facts: `DecisionCore.facts`,
  read once, once the prompt is counted; the cap rule is not restated here).
* Credentials once: a request carrying ``Authorization`` (or the signed claim header) more
  than once is refused (400): a front proxy that takes the last one would see a different
  tenant than the gateway, which would take the first.
* Types of the sampling fields the engine would refuse (`_FIELDS`). Fields
  not listed pass through untouched (engine extensions).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from starlette.requests import Request as HttpRequest

from ..errors import RvguardError

__all__ = [
    "CREDENTIAL_HEADERS",
    "MAX_DEPTH",
    "BadRequest",
    "Endpoint",
    "check_body",
    "check_credentials_once",
    "check_min_tokens",
    "parse_json",
    "read_body",
]

Endpoint = Literal["completions", "chat"]
#: deepest JSON nesting accepted (OpenAI bodies need 5 or 6: tools' JSON schemas a few more)
MAX_DEPTH = 64
#: headers that say who the client is: each may appear at most once
CREDENTIAL_HEADERS = ("authorization", "x-rvguard-claim")


class BadRequest(RvguardError, ValueError):
    """A client's request refused at the edge, before admission.

    Attributes:
        status: the HTTP status (400, 404, 408, 413).
        param: the offending body field (``None`` for the whole body).
        code: a short machine-readable code (OpenAI's ``code``).
    """

    def __init__(self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None):
        self.status = status
        self.param = param
        self.code = code
        super().__init__(message)


def check_credentials_once(http: HttpRequest) -> None:
    """Refuse (`BadRequest` 400) a request naming its credentials twice (module doc)."""
    for name in CREDENTIAL_HEADERS:
        count = len(http.headers.getlist(name))
        if count > 1:
            raise BadRequest(
                f"the {name} header appears {count} times: send it once", param=name, code="duplicate_header"
            )


async def read_body(http: HttpRequest, *, max_body: int, timeout: float) -> bytes:
    """The whole body, at most ``max_body`` bytes, within ``timeout`` seconds (else `BadRequest` 413/408)."""
    declared = http.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        raise _too_large(max_body)
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for part in http.stream():
                size += len(part)
                if size > max_body:
                    raise _too_large(max_body)
                parts.append(part)
    except TimeoutError:
        raise BadRequest(
            f"the body was not received within {timeout:g} s", status=408, code="body_timeout"
        ) from None
    return b"".join(parts)


def _too_large(max_body: int) -> BadRequest:
    return BadRequest(f"the body is larger than {max_body} bytes", status=413, code="body_too_large")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond the range of a number")
    return value


def parse_json(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, strictly (see module doc); `BadRequest` otherwise."""
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise BadRequest(f"the body nests deeper than {MAX_DEPTH} levels", code="too_deep") from None
    except ValueError as err:  # includes UnicodeDecodeError and integers over the digit limit
        raise BadRequest(f"the body is not valid JSON: {err}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", code="invalid_json")
    if _depth(body) > MAX_DEPTH:
        raise BadRequest(f"the body nests deeper than {MAX_DEPTH} levels", code="too_deep")
    if _SURROGATE_ESCAPE.search(raw):  # only an escape can carry a surrogate: a pair is fine
        _check_encodable(body)
    return body


#: a JSON escape of a UTF-16 surrogate (half of a pair, or alone)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _check_encodable(value: Any) -> None:
    """Refuse (400) a string, key or value, that UTF-8 cannot carry (a lone surrogate)."""
    stack = [value]
    while stack:
        item = stack.pop()
        texts = [item] if isinstance(item, str) else list(item) if isinstance(item, dict) else []
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                bad = f"U+{ord(text[err.start]):04X}"
                raise BadRequest(
                    f"the body holds text the engine cannot encode (a lone surrogate {bad})",
                    code="invalid_unicode",
                ) from None
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _depth(value: Any) -> int:
    """Nesting depth, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _number(lo: float, hi: float, *, open_lo: bool = False) -> Callable[[Any], bool]:
    return lambda v: _is_number(v) and (v > lo if open_lo else v >= lo) and v <= hi


def _int_at_least(lo: int) -> Callable[[Any], bool]:
    return lambda v: _is_int(v) and v >= lo


def _strings(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))


#: field → (test of a non-null value, what it must be)
_FIELDS: Mapping[str, tuple[Callable[[Any], bool], str]] = {
    "model": (lambda v: isinstance(v, str), "a string"),
    "stream": (lambda v: isinstance(v, bool), "a boolean"),
    "stream_options": (lambda v: isinstance(v, dict), "an object"),
    "n": (lambda v: v == 1 and _is_int(v), "1: each request holds one slot"),
    "best_of": (lambda v: v == 1 and _is_int(v), "1: each request holds one slot"),
    "max_tokens": (_int_at_least(1), "a positive integer"),
    "max_completion_tokens": (_int_at_least(1), "a positive integer"),
    "min_tokens": (_int_at_least(0), "a non-negative integer"),
    "temperature": (_number(0.0, math.inf), "a number ≥ 0"),
    "top_p": (_number(0.0, 1.0, open_lo=True), "a number in (0, 1]"),
    "top_k": (_int_at_least(-1), "an integer ≥ -1"),
    "presence_penalty": (_number(-2.0, 2.0), "a number in [-2, 2]"),
    "frequency_penalty": (_number(-2.0, 2.0), "a number in [-2, 2]"),
    "repetition_penalty": (_number(0.0, math.inf, open_lo=True), "a number > 0"),
    "seed": (_is_int, "an integer"),
    "stop": (_strings, "a string or a list of strings"),
    "top_logprobs": (_int_at_least(0), "a non-negative integer"),
    "echo": (lambda v: isinstance(v, bool), "a boolean"),
    "user": (lambda v: isinstance(v, str), "a string"),
    "tools": (lambda v: isinstance(v, list), "a list"),
    "tool_choice": (lambda v: isinstance(v, str | dict), "a string or an object"),
    "response_format": (lambda v: isinstance(v, dict), "an object"),
}


def check_body(body: Mapping[str, Any], endpoint: Endpoint) -> None:
    """Refuse (`BadRequest` 400) what the engine would refuse as the client's mistake (module doc)."""
    for name, (ok, what) in _FIELDS.items():
        value = body.get(name)
        if value is not None and not ok(value):
            raise BadRequest(f"'{name}' must be {what}", param=name, code="invalid_value")
    if endpoint == "completions":
        _check_prompt(body)
        if body.get("logprobs") is not None and not _int_at_least(0)(body["logprobs"]):
            raise BadRequest(
                "'logprobs' must be a non-negative integer", param="logprobs", code="invalid_value"
            )
    else:
        _check_messages(body)
        if body.get("logprobs") is not None and not isinstance(body["logprobs"], bool):
            raise BadRequest("'logprobs' must be a boolean", param="logprobs", code="invalid_value")


def check_min_tokens(body: Mapping[str, Any], capped: int) -> None:
    """Refuse (`BadRequest` 400) a ``min_tokens`` above ``capped``, the output the request may have
    (its facts' ``capped_tokens``, the ``max_tokens`` the engine gets), which the engine would
    refuse only after the request had spent its credit."""
    if body.get("min_tokens") is not None and body["min_tokens"] > capped:
        raise BadRequest(
            f"'min_tokens' ({body['min_tokens']}) is above the output the request may have ({capped} tokens)",
            param="min_tokens",
            code="invalid_value",
        )


def _check_prompt(body: Mapping[str, Any]) -> None:
    if "prompt" not in body:
        raise BadRequest("'prompt' is required", param="prompt", code="missing_required_parameter")
    prompt = body["prompt"]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str | list) for p in prompt):
        raise BadRequest(
            "batched prompts are refused: one request is one prompt (a string or a list of token ids), "
            "which holds one slot",
            param="prompt",
            code="batched_prompt",
        )
    if isinstance(prompt, str) and prompt:
        return
    if isinstance(prompt, list) and prompt and all(_is_int(t) and t >= 0 for t in prompt):
        return
    raise BadRequest(
        "'prompt' must be a non-empty string or a non-empty list of token ids",
        param="prompt",
        code="invalid_value",
    )


def _check_messages(body: Mapping[str, Any]) -> None:
    if "messages" not in body:
        raise BadRequest("'messages' is required", param="messages", code="missing_required_parameter")
    messages = body["messages"]
    if not (
        isinstance(messages, list)
        and messages
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
    ):
        raise BadRequest(
            "'messages' must be a non-empty list of objects, each with a 'role'",
            param="messages",
            code="invalid_value",
        )
