"""Relocation, the pure part: what resumes, how, and how the client's stream stays one."""

from __future__ import annotations

import pytest

from rvguard.fleet.relocate import NotRelocatable, Progress, RelocationSlots, continuation, relocatable

BODY = {"model": "tiny", "prompt": "Hello", "max_tokens": 10, "temperature": 0, "stream": True}


def _chunk(ids: list[int], text: str, *, prompt: list[int] | None = None, finish: str | None = None) -> dict:
    choice = {"index": 0, "text": text, "token_ids": ids, "finish_reason": finish}
    if prompt is not None:
        choice["prompt_token_ids"] = prompt
    return {"id": "cmpl-a", "created": 1, "model": "tiny", "choices": [choice]}


def test_the_continuation_is_prompt_then_output_ids_with_the_budget_left() -> None:
    p = Progress()
    p.feed(_chunk([5], "a", prompt=[1, 2, 3]))
    p.feed(_chunk([6, 7], "bc"))
    got = continuation(BODY, p)
    assert got["prompt"] == [1, 2, 3, 5, 6, 7]
    assert got["max_tokens"] == 7
    assert got["return_token_ids"] is True
    assert (got["temperature"], got["stream"]) == (0, True)
    assert BODY["prompt"] == "Hello"  # the original body is untouched


def test_a_request_that_produced_nothing_is_sent_again_as_it_was() -> None:
    assert continuation(BODY, Progress()) == {**BODY, "return_token_ids": True}


def test_a_finished_request_does_not_continue() -> None:
    p = Progress()
    p.feed(_chunk([5], "a", prompt=[1], finish="length"))
    with pytest.raises(NotRelocatable, match="already finished"):
        continuation(BODY, p)


@pytest.mark.parametrize(
    ("path", "change", "why"),
    [
        ("/v1/chat/completions", {}, "only /v1/completions"),
        ("/v1/completions", {"n": 2}, "n > 1"),
        ("/v1/completions", {"echo": True}, "echo"),
        ("/v1/completions", {"prompt": ["a", "b"]}, "list of prompts"),
        ("/v1/completions", {"use_beam_search": True}, "use_beam_search"),
    ],
)
def test_relocatable_says_why_not(path: str, change: dict, why: str) -> None:
    assert why in relocatable(path, {**BODY, **change})


def test_relocatable_requests() -> None:
    assert relocatable("/v1/completions", BODY) == ""
    assert relocatable("/v1/completions", {**BODY, "prompt": [1, 2, 3]}) == ""


def test_before_a_move_the_engine_text_passes_through() -> None:
    p = Progress()
    first = _chunk([5, 6], "ab", prompt=[1, 2])
    p.feed(first)
    out = p.outgoing(first, keep_ids=True)
    assert out["choices"][0] == {"index": 0, "text": "ab", "token_ids": [5, 6], "finish_reason": None}
    assert p.text == "ab"


def test_the_resumed_stream_is_dressed_as_the_first() -> None:
    p = Progress()
    p.feed(_chunk([5, 6], "ab", prompt=[1, 2]))
    p.outgoing(_chunk([5, 6], "ab", prompt=[1, 2]), keep_ids=False)
    p.moved()
    resumed = {
        "id": "cmpl-b",
        "created": 9,
        "model": "tiny",
        "choices": [{"index": 0, "text": "GARBLED", "token_ids": [7], "prompt_token_ids": [1, 2, 5, 6]}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5},
    }
    p.feed(resumed)
    out = p.outgoing(resumed, keep_ids=False, rendered="abc")
    assert (out["id"], out["created"]) == ("cmpl-a", 1)
    assert out["choices"][0]["text"] == "c"  # rendered from the ids, never the new engine's text
    assert "token_ids" not in out["choices"][0] and "prompt_token_ids" not in out["choices"][0]
    assert out["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    assert p.prompt_ids == [1, 2] and p.output_ids == [5, 6, 7]


def test_after_a_move_bytes_of_no_character_are_held_back_as_the_engine_does() -> None:
    p = Progress()
    p.feed(_chunk([5], "a", prompt=[1]))
    p.outgoing(_chunk([5], "a"), keep_ids=True)
    p.moved()
    sent = []
    for ids, rendered in (([6], "a\ufffd"), ([7], "a\ufffdb"), ([8], "a\ufffdb\ufffd")):
        c = _chunk(ids, "?")
        p.feed(c)
        sent.append(p.outgoing(c, keep_ids=True, rendered=rendered)["choices"][0]["text"])
    assert sent == ["", "\ufffdb", ""]
    assert p.text == "a\ufffdb" and p.sent_ids == 4
    with pytest.raises(ValueError, match="rendered"):
        p.outgoing(_chunk([9], "?"), keep_ids=False)


def test_at_most_k_relocations_at_once() -> None:
    slots = RelocationSlots(2)
    assert [slots.acquire() for _ in range(3)] == [True, True, False]
    assert (slots.busy, slots.refused) == (2, 1)
    slots.release()
    assert slots.acquire()
    with pytest.raises(ValueError, match="k must be"):
        RelocationSlots(-1)
    empty = RelocationSlots(0)
    with pytest.raises(RuntimeError, match="without acquire"):
        empty.release()
