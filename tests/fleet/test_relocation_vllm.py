"""Relocation on the real engine: cut a greedy stream on one vLLM, resume it on another.

The client's view (token ids and text, through `Progress.outgoing`) must be
the uninterrupted run's, whatever token the cut falls after — including
after tokens that are stray bytes (the tiny random model emits many), where
the resumed engine's own text would be garbled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rvguard.fleet.relocate import Progress, continuation

PROMPTS = ["A request arrives, is admitted", "zq!", "0123456789 abc"]
CUTS = [1, 4, 9, 15]
TOKENS = 20


def _chunks(engine: Any, body: dict[str, Any], stop_after: int | None = None) -> Iterator[dict[str, Any]]:
    post = {"json": body, "headers": engine.headers, "timeout": 300}
    with httpx.stream("POST", engine.url + "/v1/completions", **post) as r:
        r.raise_for_status()
        seen = 0
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            yield chunk
            seen += sum(len(c.get("token_ids") or ()) for c in chunk["choices"])
            if stop_after is not None and seen >= stop_after:
                return  # closing the stream here is the engine going away under the request


def _render(engine: Any, ids: list[int]) -> str:
    r = httpx.post(engine.url + "/detokenize", json={"model": "tiny", "tokens": ids}, timeout=60)
    r.raise_for_status()
    return str(r.json()["prompt"])


def _client_view(a: Any, b: Any, body: dict[str, Any], cut: int) -> tuple[str, list[int], bool]:
    p, ids = Progress(), []
    for chunk in _chunks(a, body, stop_after=cut):
        p.feed(chunk)
        ids += p.outgoing(chunk, keep_ids=True)["choices"][0]["token_ids"]
    if p.finished:
        return p.text, ids, False
    resumed = continuation(body, p)
    assert resumed["prompt"][-len(p.output_ids) :] == p.output_ids
    p.moved()
    for chunk in _chunks(b, resumed):
        p.feed(chunk)
        out = p.outgoing(chunk, keep_ids=True, rendered=_render(b, p.output_ids))
        ids += out["choices"][0]["token_ids"]
    return p.text, ids, True


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_output_resumed_on_another_engine_equals_the_uninterrupted_run(
    two_engines, prompt: str
) -> None:
    a, b = two_engines
    body = {"model": "tiny", "prompt": prompt, "max_tokens": TOKENS, "temperature": 0, "stream": True}
    body["return_token_ids"] = True
    ref = Progress()
    for chunk in _chunks(a, body):
        ref.feed(chunk)
        ref.outgoing(chunk, keep_ids=False)
    assert len(ref.output_ids) == TOKENS
    moved = 0
    for cut in CUTS:
        text, ids, relocated = _client_view(a, b, body, cut)
        assert ids == ref.output_ids, f"cut after {cut}"
        assert text == ref.text, f"cut after {cut}"
        moved += relocated
    assert moved >= len(CUTS) - 1  # a cut can come after the last chunk when the engine batches them
