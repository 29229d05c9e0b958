"""One reader for OpenAI-compatible streamed answers (SSE), shared by every upstream client.

`VLLMDispatcher` and the gateway's `UpstreamDispatcher` both ask the engine
for a stream (to time the first token and to abort a sequence by closing it)
and read it here: `sse_data` reads the events with httpx-sse (the SSE spec's parser),
`sse_chunks` yields each ``data:`` event parsed up to ``[DONE]`` (a stream that
ends before it, a malformed chunk or an ``error`` chunk raise `DispatchError`),
and `Assembly` folds the chunks into the answer the engine would have given
non-streamed.

Theory of operation (`Assembly`)
--------------------------------
A streamed answer is a sequence of deltas; the non-streamed one is their
fold. Top-level fields describe the whole answer (``id``, ``model``,
``usage``, ``system_fingerprint``, ...): the latest non-null value wins. Within a
choice the fold is generic so that no field is lost, known or not (content,
``reasoning_content``, refusal, tool calls, logprobs, an engine's own
extensions): strings concatenate, objects merge key by key, lists of objects
that carry an ``index`` (tool calls) merge entry by entry, other lists extend,
and identity fields (``id``, ``type``, ``role``, ``finish_reason``, ...) take the
latest non-null value. Chat deltas become the choice's ``message``. The
SDKs accumulate streams by the same rules (openai-python's
``accumulate_delta``), so a client sees one answer whichever way it asked.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..errors import DispatchError
from ..events import CLIENT_ERROR

__all__ = ["Assembly", "client_fault", "http_error", "parse_chunk", "sse_chunks", "sse_data"]

#: 4xx statuses that are not the client's fault: the gateway's own upstream credentials (401, 403,
#: 407), the engine's timeouts and rate limits (408, 429)
_SERVICE_4XX = frozenset({401, 403, 407, 408, 429})

#: fields within a choice that name or classify rather than accumulate: the latest non-null value wins
_REPLACE = frozenset({"index", "id", "type", "role", "finish_reason", "stop_reason"})
#: a chunk's object type → the non-streamed answer's
_OBJECT = {"chat.completion.chunk": "chat.completion", "text_completion": "text_completion"}


async def sse_data(resp: Any) -> AsyncIterator[str]:
    """The ``data`` of each event of a streamed (SSE) body, read by httpx-sse as the SSE spec says.

    Lines end at LF, CR LF or CR only (not at U+2028, U+0085 and the like, which a model can
    emit and a JSON encoder may leave raw inside a chunk: ``httpx.Response.aiter_lines`` cut
    such a chunk in two); an event's ``data:`` lines are joined with LF (an upstream may spread
    one JSON chunk over several); comments and events without data are skipped.

    Raises:
        DispatchError: the body is not an event stream (its content type says otherwise; 502).
    """
    from httpx_sse import EventSource, SSEError

    try:
        async for event in EventSource(resp).aiter_sse():
            if event.data:
                yield event.data
    except SSEError as err:
        raise DispatchError(f"not an event stream: {err}", status_hint=502) from None


def parse_chunk(data: str) -> Mapping[str, Any]:
    """One SSE chunk as an object; a malformed or ``error`` chunk raises `DispatchError`.

    vLLM reports a failure after the 200 as ``{"error": {"message", "code", ...}}``
    (older releases: the error object itself, ``"object": "error"``); its
    ``code`` becomes the status when it is an HTTP error status, and the error
    object travels on the exception (``.error``) to be relayed as it came.
    """
    try:
        chunk = json.loads(data)
    except ValueError:
        chunk = None
    if not isinstance(chunk, Mapping):
        raise DispatchError(f"malformed chunk: {data[:80]!r}", status_hint=502)
    err = chunk.get("error") if "error" in chunk else (chunk if chunk.get("object") == "error" else None)
    if err is None:
        return chunk
    message = err.get("message", err) if isinstance(err, Mapping) else err
    code = err.get("code") if isinstance(err, Mapping) else None
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 502
    error = err if isinstance(err, Mapping) else None
    reason = f"{CLIENT_ERROR}: error chunk {status}" if client_fault(status) else ""
    raise DispatchError(f"error chunk: {str(message)[:200]}", status_hint=status, error=error, reason=reason)


def client_fault(status: int) -> bool:
    """True when an upstream HTTP status blames the client's request (a 4xx but those of `_SERVICE_4XX`)."""
    return 400 <= status < 500 and status not in _SERVICE_4XX


def _error_object(body: bytes) -> Mapping[str, Any] | None:
    """The error object of an OpenAI-style error body (``{"error": {...}}`` or vLLM's older flat one)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, Mapping) and isinstance(data.get("error"), Mapping):
        return dict(data["error"])
    if isinstance(data, Mapping) and data.get("object") == "error":
        return {k: v for k, v in data.items() if k != "object"}
    return None


def http_error(status: int, body: bytes) -> DispatchError:
    """The `DispatchError` for an upstream's non-200 answer: its status, its own error object kept.

    A client's fault (`client_fault`) is recorded as ``client-error: http <status>``.
    """
    detail = body.decode("utf-8", "replace")[:200]
    error = _error_object(body)
    reason = f"{CLIENT_ERROR}: http {status}" if client_fault(status) else ""
    return DispatchError(f"http {status}: {detail}", status_hint=status, error=error, reason=reason)


async def sse_chunks(resp: Any) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
    """Each ``data:`` event of a stream as (its JSON text, the parsed chunk), up to ``[DONE]``.

    The text is the event's own, except that an event spread over several ``data:`` lines
    comes back as its JSON on one line (the gateway relays it as one ``data:`` line).

    Raises:
        DispatchError: a malformed or ``error`` chunk (`parse_chunk`), or a
            stream that ends before ``[DONE]`` (502): a cut stream is a failed request.
    """
    async for item in data_chunks(sse_data(resp)):
        yield item


async def data_chunks(events: AsyncIterator[str]) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
    """`sse_chunks` over events' ``data`` read by any reader (the gateway's lean one, too)."""
    async for data in events:
        if data.strip() == "[DONE]":
            return
        chunk = parse_chunk(data)
        if "\n" in data:  # relayed as one ``data:`` line: the JSON again, compact
            data = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
        yield data, chunk
    raise DispatchError("stream ended before [DONE]", status_hint=502)


def _merge(acc: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Fold ``delta`` into ``acc`` (see module doc)."""
    for key, value in delta.items():
        old = acc.get(key)
        if value is None:
            acc.setdefault(key, None)
        elif old is None or key in _REPLACE:
            acc[key] = copy.deepcopy(value)
        elif isinstance(old, str) and isinstance(value, str):
            acc[key] = old + value
        elif isinstance(old, dict) and isinstance(value, Mapping):
            _merge(old, value)
        elif isinstance(old, list) and isinstance(value, list):
            _merge_list(old, value)
        else:
            acc[key] = copy.deepcopy(value)


def _indexed(item: Any) -> bool:
    return isinstance(item, Mapping) and isinstance(item.get("index"), int)


def _merge_list(acc: list[Any], items: list[Any]) -> None:
    """Entries with an ``index`` (tool calls) merge into the entry of that index; others append."""
    for item in items:
        if _indexed(item):
            into = next((a for a in acc if _indexed(a) and a["index"] == item["index"]), None)
            if into is not None:
                _merge(into, item)
                continue
        acc.append(copy.deepcopy(item))


def _has_output(choice: Mapping[str, Any]) -> bool:
    """True when a streamed choice carries generated output (text, content, reasoning, tool calls...)."""
    if choice.get("text"):
        return True
    delta = choice.get("delta")
    return isinstance(delta, Mapping) and any(v for k, v in delta.items() if k != "role")


class Assembly:
    """The non-streamed answer, folded chunk by chunk from a stream (see module doc).

    Memory: O(the answer's size).
    """

    __slots__ = ("_choices", "_top")

    def __init__(self) -> None:
        self._top: dict[str, Any] = {}
        self._choices: dict[int, dict[str, Any]] = {}

    def add(self, chunk: Mapping[str, Any]) -> bool:
        """Fold one chunk in; True when it carries generated output (for the first-token time)."""
        self._top.update({k: v for k, v in chunk.items() if k != "choices" and v is not None})
        output = False
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping):
                continue
            index = choice.get("index", 0)
            _merge(self._choices.setdefault(index if isinstance(index, int) else 0, {}), choice)
            output = output or _has_output(choice)
        return output

    @property
    def usage(self) -> Mapping[str, Any]:
        """The usage the stream reported (empty when none)."""
        usage = self._top.get("usage")
        return usage if isinstance(usage, Mapping) else {}

    @property
    def text(self) -> str:
        """The first choice's generated text (completions ``text``, chat ``content``)."""
        choice = self._choices.get(0, {})
        if "text" in choice:
            return str(choice.get("text") or "")
        delta = choice.get("delta")
        return str((delta or {}).get("content") or "") if isinstance(delta, Mapping) else ""

    def answer(self) -> dict[str, Any]:
        """The whole answer in the non-streamed shape (``message`` for chat, ``text`` for completions)."""
        out = copy.deepcopy(self._top)
        obj = out.get("object")
        chat = obj == "chat.completion.chunk" or any("delta" in c for c in self._choices.values())
        out["object"] = _OBJECT.get(str(obj), "chat.completion" if chat else "text_completion")
        out["choices"] = [_final_choice(self._choices[i], chat=chat) for i in sorted(self._choices)]
        out.setdefault("usage", None)
        return out


def _final_choice(choice: Mapping[str, Any], *, chat: bool) -> dict[str, Any]:
    out = copy.deepcopy(dict(choice))
    out.setdefault("logprobs", None)
    out.setdefault("finish_reason", None)
    if not chat:
        out.setdefault("text", "")
        return out
    message = out.pop("delta", None) or {}
    message.setdefault("role", "assistant")
    message.setdefault("content", None)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        message["tool_calls"] = [
            {k: v for k, v in c.items() if k != "index"} if isinstance(c, dict) else c
            for c in sorted(calls, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        ]
    out["message"] = message
    return out
