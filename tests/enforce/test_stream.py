"""The shared stream reader: chunks up to [DONE], errors, and the fold into the non-streamed answer."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from rvguard.enforce.stream import Assembly, client_fault, http_error, sse_chunks
from rvguard.errors import DispatchError


class _Body:
    headers: ClassVar[dict[str, str]] = {"content-type": "text/event-stream"}

    def __init__(self, *pieces: str) -> None:
        self._pieces = pieces

    async def aiter_text(self) -> AsyncIterator[str]:
        for p in self._pieces:
            yield p


def _split(text: str, cuts: list[int]) -> list[str]:
    edges = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(edges)]


@hsettings(max_examples=60, deadline=None)
@given(
    content=st.lists(st.text(max_size=4), min_size=1, max_size=6),
    args=st.lists(st.text(max_size=4), min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
)
async def test_the_fold_concatenates_deltas_and_merges_tool_calls_by_index(
    content: list[str], args: list[str], cuts: list[int]
) -> None:
    """However the stream is cut into network reads, the fold is the concatenation of the deltas."""
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    ]
    chunks += [{"choices": [{"index": 0, "delta": {"content": c}}]} for c in content]
    first = {"index": 1, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
    chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [first]}}]})
    for i, a in enumerate(args):  # call 0 arrives after call 1 began: merged by index, sorted
        call = {"index": i % 2, "function": {"arguments": a}}
        if i == 0:
            call |= {"id": "c0", "type": "function", "function": {"name": "g", "arguments": a}}
        chunks.append(
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"tool_calls": [call]}}],
            }
        )
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append({"choices": [], "usage": {"completion_tokens": 3}})
    wire = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    answer = Assembly()
    async for _data, chunk in sse_chunks(_Body(*_split(wire, cuts))):
        answer.add(chunk)
    whole = answer.answer()
    message = whole["choices"][0]["message"]
    assert message["content"] == "".join(content) and answer.text == "".join(content)
    assert [c["id"] for c in message["tool_calls"]] == ["c0", "c1"]
    assert message["tool_calls"][0]["function"] == {"name": "g", "arguments": "".join(args[0::2])}
    assert message["tool_calls"][1]["function"] == {"name": "f", "arguments": "".join(args[1::2])}
    assert "index" not in message["tool_calls"][0]
    assert whole["object"] == "chat.completion" and whole["usage"] == {"completion_tokens": 3}
    assert whole["choices"][0]["finish_reason"] == "tool_calls"


async def test_a_cut_stream_and_an_error_chunk_raise_with_the_upstream_object() -> None:
    with pytest.raises(DispatchError, match="before"):
        async for _ in sse_chunks(_Body('data: {"choices": []}\n\n')):
            pass
    err = {"message": "bad", "type": "BadRequestError", "param": None, "code": 400}
    with pytest.raises(DispatchError) as info:
        async for _ in sse_chunks(_Body(f"data: {json.dumps({'error': err})}\n\n")):
            pass
    assert info.value.error == err and info.value.status_hint == 400
    assert info.value.reason.startswith("client-error")


def test_http_errors_keep_the_upstream_object_and_blame_only_the_client() -> None:
    e = http_error(400, b'{"error": {"message": "m", "type": "t", "param": "p", "code": 400}}')
    assert (
        e.error == {"message": "m", "type": "t", "param": "p", "code": 400}
        and e.reason == "client-error: http 400"
    )
    flat = http_error(404, b'{"object": "error", "message": "no model", "code": 404}')
    assert flat.error == {"message": "no model", "code": 404}
    assert http_error(500, b"oops").error is None and http_error(500, b"oops").reason == ""
    assert [s for s in range(400, 600) if not client_fault(s) and s < 500] == [401, 403, 407, 408, 429]


@hsettings(max_examples=40, deadline=None)
@given(
    content=st.lists(st.text(max_size=4), min_size=1, max_size=5),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
)
async def test_an_event_spread_over_several_data_lines_is_one_chunk(
    content: list[str], cuts: list[int]
) -> None:
    """Before: each ``data:`` line was parsed alone, and the request failed as a "malformed chunk"."""
    chunks = [{"id": "x", "choices": [{"index": 0, "text": c}]} for c in content]
    wire = "".join(
        "".join(f"data: {line}\n" for line in json.dumps(c, indent=1, ensure_ascii=False).split("\n")) + "\n"
        for c in chunks
    )
    answer = Assembly()
    seen = []
    async for data, chunk in sse_chunks(_Body(*_split(wire + "data: [DONE]\n\n", cuts))):
        assert "\n" not in data and json.loads(data) == chunk  # relayed as one data: line
        seen.append(chunk)
        answer.add(chunk)
    assert seen == chunks and answer.text == "".join(content)
