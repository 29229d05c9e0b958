"""The gateway as the official `openai` SDK sees it: the whole wire, typed errors, retries that help."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from rvguard.contract import Contract
from rvguard.enforce.learners import RejectAll
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def sdk(url: str, key: str = "sk-opp", **kw: Any) -> openai.AsyncOpenAI:
    kw.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, **kw)


def chat(prompt: str, **kw: Any) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": prompt}], "max_tokens": 6, **kw}


async def test_non_streamed_tool_calls_reasoning_refusal_and_unknown_fields_survive(tmp_path: Path) -> None:
    """Before: ``tool_calls: []``, ``content: ''``, no ``reasoning_content`` (a hand-written fold)."""
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
        sdk(url) as client,
    ):
        tool = await client.chat.completions.create(**chat("tool please", tools=TOOLS))
        reason = await client.chat.completions.create(**chat("reason first"))
        refuse = await client.chat.completions.create(**chat("refuse this"))
        extra = await client.chat.completions.create(**chat("extra fields"))
    [call] = tool.choices[0].message.tool_calls or []
    assert (call.id, call.type, call.function.name) == ("call-fake-0", "function", "lookup")
    assert call.function.arguments == '{"q": "t0", "n": 1}'
    assert tool.choices[0].finish_reason == "tool_calls"
    message = reason.choices[0].message
    assert message.model_extra == {"reasoning_content": "t0 t1 t2 "} and message.content == "t3 t4 t5 "
    assert refuse.choices[0].message.refusal == "t0 t1 t2 t3 t4 t5 "
    assert extra.model_extra == {"x_fake_top": "kept"}
    assert extra.choices[0].message.model_extra == {"x_fake_note": "n0n1n2n3n4n5"}
    assert extra.choices[0].model_extra == {"x_fake_choice": {"seen": [0, 1, 2, 3, 4, 5]}}
    assert tool.usage is not None and tool.usage.completion_tokens == 3


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", chat("tool", tools=TOOLS)),
        ("/v1/chat/completions", chat("reason", logprobs=True)),
        ("/v1/chat/completions", chat("refuse")),
        ("/v1/chat/completions", chat("extra")),
        ("/v1/chat/completions", chat("plain", logprobs=True)),
        ("/v1/completions", {"model": "fake", "prompt": "plain", "max_tokens": 5, "logprobs": 2}),
        ("/v1/completions", {"model": "fake", "prompt": "extra", "max_tokens": 5}),
    ],
)
async def test_the_folded_answer_equals_the_upstream_own_non_streamed_answer(
    tmp_path: Path, path: str, body: dict[str, Any]
) -> None:
    """The gateway streams upstream and folds; the fake writes its non-streamed answer out directly."""
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        via = (await client.post(url + path, json=body, headers=auth("sk-opp"))).json()
        direct = (await client.post(up.url + path, json=body)).json()
    for answer in (via, direct):
        assert answer.pop("id").startswith("fake-")
    assert via == direct


async def test_streams_through_the_sdk_helpers(tmp_path: Path) -> None:
    """``chat.completions.stream(...).get_final_completion()`` (the SDK's own fold) and completions."""
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
        sdk(url) as client,
        openai.AsyncOpenAI(base_url=up.url + "/v1", api_key="none", max_retries=0) as direct,
    ):
        strict = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "strict": True}}]
        async with client.chat.completions.stream(**chat("tool", tools=strict)) as stream:
            final = await stream.get_final_completion()
        async with direct.chat.completions.stream(**chat("reason, then stop")) as stream:
            fake_final = await stream.get_final_completion()
        pieces = [
            c.choices[0].text
            async for c in await client.completions.create(
                model="fake", prompt="p", max_tokens=3, stream=True
            )
        ]
        whole = await client.completions.create(model="fake", prompt="p", max_tokens=3)
    [call] = final.choices[0].message.tool_calls or []
    assert call.function.name == "lookup" and call.function.parsed_arguments == {"q": "t0", "n": 1}
    assert fake_final.choices[0].message.content == "t3 t4 t5 "  # the fake speaks the real chunk shape
    assert pieces == ["t0 ", "t1 ", "t2 "] and whole.choices[0].text == "t0 t1 t2 "


async def test_errors_are_openai_shaped_and_raise_the_sdk_types(tmp_path: Path) -> None:
    c, trace = contract(window=1000.0), tmp_path / "t.jsonl"
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, trace, learner=RejectAll())) as (_gw, url),
        sdk(url, "sk-opp") as opp,
        sdk(url, "sk-assured") as assured,
        sdk(url, "sk-wrong") as nobody,
    ):
        raised: dict[str, openai.APIStatusError] = {}
        calls = {
            "unauthenticated": nobody.completions.create(model="fake", prompt="x", max_tokens=1),
            "rate_limited": opp.completions.create(model="fake", prompt="x", max_tokens=1),
            "batched": assured.completions.create(model="fake", prompt=["a", "b"], max_tokens=1),
            "unknown_model": assured.completions.create(model="nope", prompt="x", max_tokens=1),
            "unknown_route": assured.embeddings.create(model="fake", input="x"),
            "upstream_400": assured.completions.create(model="fake", prompt="400 please", max_tokens=1),
            "upstream_500": assured.completions.create(model="fake", prompt="500 please", max_tokens=1),
        }
        for name, call in calls.items():
            with pytest.raises(openai.APIStatusError) as info:
                await call
            raised[name] = info.value
    assert isinstance(raised["unauthenticated"], openai.AuthenticationError)
    assert isinstance(raised["rate_limited"], openai.RateLimitError)
    assert isinstance(raised["batched"], openai.BadRequestError)
    assert isinstance(raised["unknown_model"], openai.NotFoundError)
    assert isinstance(raised["unknown_route"], openai.NotFoundError)
    assert isinstance(raised["upstream_400"], openai.BadRequestError)
    assert isinstance(raised["upstream_500"], openai.InternalServerError)
    for err in raised.values():
        body = err.body
        assert isinstance(body, dict) and set(body) >= {"message", "type", "param", "code"}, body
        assert err.response.headers["x-request-id"]
    assert raised["batched"].code == "batched_prompt" and raised["batched"].param == "prompt"
    assert raised["unknown_route"].code == "unknown_url"
    for name, status in (("upstream_400", 400), ("upstream_500", 500)):  # the upstream's own object
        assert raised[name].body == {
            "message": f"fake failure {status}",
            "type": "FakeError",
            "param": "prompt",
            "code": status,
        }
    assert raised["upstream_400"].response.headers["x-should-retry"] == "false"


def _doomed_contract() -> Contract:
    """Every opportunistic request is doomed at dispatch: L = 0.2 s > its 0.1 s deadline."""
    return contract(
        service={"s_max": 0.4, "s_max_opp": 0.4, "lower": 0.2, "upper": None},
        tenants={
            "assured": {"floor": 2, "deadline": 1.5, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 0.1, "tier": 1},
        },
    )


async def test_a_doomed_request_is_not_retried_by_the_sdk(tmp_path: Path) -> None:
    """Before: a bare 503, and the SDK's two default retries resubmitted the doomed request."""
    c, trace = _doomed_contract(), tmp_path / "t.jsonl"
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, trace, deferred_drop=True)) as (_gw, url),
        sdk(url, max_retries=2) as client,
    ):
        with pytest.raises(openai.InternalServerError) as info:
            await client.completions.create(model="fake", prompt="x", max_tokens=1)
    assert info.value.status_code == 503 and info.value.response.headers["x-should-retry"] == "false"
    events = read_trace(trace)
    assert [e["kind"] for e in events] == ["arrive", "admit", "drop"]  # one arrival: no retry


async def test_a_rejected_client_retries_at_the_window_edge_not_a_second_later(tmp_path: Path) -> None:
    """Before: ``Retry-After`` in whole seconds only, rounded up past the window edge."""
    tenants = {
        "assured": {"floor": 1, "deadline": 1.5, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    }
    c, trace = contract(window=2.0, tenants=tenants), tmp_path / "t.jsonl"
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, trace, learner=RejectAll())) as (gw, url),
        sdk(url, "sk-assured", max_retries=1) as client,
    ):
        raw = await client.completions.with_raw_response.create(model="fake", prompt="x", max_tokens=1)
        assert raw.headers["x-ratelimit-limit-requests"] == "1"
        assert raw.headers["x-ratelimit-remaining-requests"] == "0"
        await asyncio.sleep(max(0.0, 0.7 - gw.clock.now()))  # the next window starts at t = 2.0, 1.3 s on
        retried = await client.completions.create(model="fake", prompt="x", max_tokens=1)
    assert retried.choices[0].text == "t0 "
    arrivals = [e["t"] for e in read_trace(trace) if e["kind"] == "arrive"]
    assert len(arrivals) == 3 and arrivals[1] < 2.0 <= arrivals[2] < 2.3
