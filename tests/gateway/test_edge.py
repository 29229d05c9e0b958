"""The gateway's edge: identity before the body, bounded bodies and headers, strict JSON, client mistakes."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from rvguard.check import check_trace
from rvguard.gateway.edge import MAX_DEPTH, BadRequest, check_body, check_min_tokens, parse_json
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings


async def _raw(url: str, data: bytes, *, wait: float = 5.0) -> tuple[bytes, float]:
    """Send raw bytes on a fresh connection; return what came back before the server closed it, and when."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    start = time.monotonic()
    writer.write(data)
    await writer.drain()
    try:
        got = await asyncio.wait_for(reader.read(), wait)
    finally:
        writer.close()
    return got, time.monotonic() - start


async def test_unauthenticated_is_refused_on_its_headers_before_the_body(tmp_path: Path) -> None:
    """Before: a 300 MB body was read whole before the 401."""
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
    ):
        head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 300000000\r\n\r\n{"
        got, took = await _raw(url, head)
    assert got.startswith(b"HTTP/1.1 401") and took < 2.0
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "authentication_error"


async def test_oversized_bodies_are_413_declared_or_streamed(tmp_path: Path) -> None:
    s = settings("http://127.0.0.1:9", tmp_path / "t.jsonl", max_body=1000)
    async with gateway(contract(), s) as (gw, url), httpx.AsyncClient() as client:
        declared = await client.post(url + "/v1/completions", content=b"x" * 1001, headers=auth("sk-opp"))
        head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-opp\r\n"
        chunk = b"258\r\n" + b" " * 600 + b"\r\n"  # two chunks of 600 bytes, no length declared
        got, _took = await _raw(url, head + b"transfer-encoding: chunked\r\n\r\n" + chunk * 2)
        streamed = httpx.Response(int(got.split(b" ", 2)[1]), content=got.split(b"\r\n\r\n", 1)[1])
        fits = await client.post(url + "/v1/completions", json={"prompt": ""}, headers=auth("sk-opp"))
    assert declared.status_code == streamed.status_code == 413
    assert declared.json()["error"]["code"] == "body_too_large"
    assert fits.status_code == 400  # read, then refused for its empty prompt
    assert read_trace(tmp_path / "t.jsonl") == [] and gw.guard.statistics().submitted == 0


async def test_slow_headers_and_slow_bodies_are_timed_out(tmp_path: Path) -> None:
    """Before: half-sent headers or bodies held their connections for ever (400 still open after 100 s)."""
    s = settings("http://127.0.0.1:9", None, header_timeout=0.3, body_timeout=0.3)
    async with gateway(contract(), s) as (_gw, url):
        half_head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-opp\r\n"
        half_body = half_head + b"content-length: 100\r\n\r\n{"
        results = await asyncio.gather(
            *(_raw(url, half_head) for _ in range(20)),
            _raw(url, b""),  # connects, says nothing
            _raw(url, half_body),
        )
    *heads, (idle, idle_took), (body, body_took) = results
    for got, took in heads:
        assert got.startswith(b"HTTP/1.1 408") and b"header_timeout" in got and took < 2.0
    assert idle == b"" and idle_took < 2.0
    assert body.startswith(b"HTTP/1.1 408") and b"body_timeout" in body and body_took < 2.0


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "too_deep"),  # before: 500 and a RecursionError
        (b'{"prompt": "x", "a": ' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}", "too_deep"),
        (b'{"prompt": "x", "temperature": NaN}', "invalid_json"),
        (b'{"prompt": "x", "temperature": Infinity}', "invalid_json"),
        (b'{"prompt": "x", "temperature": -Infinity}', "invalid_json"),
        (b'{"prompt": "x", "temperature": 1e999}', "invalid_json"),
        (b'{"prompt": "x", "seed": ' + b"9" * 5000 + b"}", "invalid_json"),
        (b'{"prompt": "\xff"}', "invalid_json"),
    ],
)
async def test_malformed_json_is_400_at_the_edge(tmp_path: Path, raw: bytes, code: str) -> None:
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        r = await client.post(url + "/v1/completions", content=raw, headers=auth("sk-assured"))
    assert r.status_code == 400 and r.json()["error"]["code"] == code
    assert read_trace(tmp_path / "t.jsonl") == [] and up.bodies == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": ["a", "b"]}, "prompt"),  # before: one request, two engine sequences
        ({"prompt": [[1, 2], [3]]}, "prompt"),
        ({"prompt": ["a"]}, "prompt"),
        ({"prompt": []}, "prompt"),  # before: with token credits, a request of weight 0
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "temperature": "hot"}, "temperature"),  # before: spent floor credit, then SF
        ({"prompt": "x", "top_p": 0}, "top_p"),
        ({"prompt": "x", "stop": [1]}, "stop"),
        ({"prompt": "x", "min_tokens": 97}, "min_tokens"),  # above the cap of 96
        ({"prompt": "x", "max_tokens": 4, "min_tokens": 5}, "min_tokens"),
        ({"prompt": "x", "logprobs": True}, "logprobs"),
        ({"prompt": "x", "n": 2}, "n"),
    ],
)
async def test_client_mistakes_cost_no_credit_and_leave_no_trace(
    tmp_path: Path, body: dict[str, Any], param: str
) -> None:
    c = contract(
        credit="tokens",
        tenants={
            "assured": {"floor": 500, "deadline": 1.5, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
        },
    )
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, tmp_path / "t.jsonl")) as (gw, url),
        httpx.AsyncClient() as client,
    ):
        r = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        metrics = (await client.get(url + "/metrics")).text
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.json()
    assert read_trace(tmp_path / "t.jsonl") == [] and up.bodies == []
    assert gw.guard.core.floor_used("assured", 0.0) == 0
    assert 'rvguard_invalid_requests_total{code="' in metrics


async def test_a_token_id_prompt_and_a_known_model_pass(tmp_path: Path) -> None:
    async with (
        FakeUpstream(model="tiny") as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (gw, url),
        httpx.AsyncClient() as client,
    ):
        while not gw.upstream_up:  # the first probe has listed the models
            await asyncio.sleep(0.01)
        body = {"model": "tiny", "prompt": [1, 2, 3]}
        ok = await client.post(url + "/v1/completions", json=body, headers=auth("sk-opp"))
        body = {"model": "big", "prompt": "x"}
        unknown = await client.post(url + "/v1/completions", json=body, headers=auth("sk-opp"))
    assert ok.status_code == 200 and up.bodies[0]["prompt"] == [1, 2, 3]
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert len(up.bodies) == 1


async def test_an_upstream_4xx_is_the_client_error_not_an_sf_violation(tmp_path: Path) -> None:
    """Before: the upstream's 400 for an entitled request was a ``fail`` that SF blamed on the guard."""
    c, trace = contract(), tmp_path / "t.jsonl"
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, trace)) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        body = {"prompt": "422 me"}
        r = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        body = {"prompt": "500"}
        broken = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        metrics = (await client.get(url + "/metrics")).text
    assert r.status_code == 422 and r.json() == {
        "error": {"message": "fake failure 422", "type": "FakeError", "param": "prompt", "code": 422}
    }
    assert broken.status_code == 502
    events = read_trace(trace)
    fails = [e["reason"] for e in events if e["kind"] == "fail"]
    assert fails[0] == "client-error: http 422" and not fails[1].startswith("client-error")
    report = check_trace(str(trace), c)
    assert [(v.property, v.rid) for v in report.violations] == [("SF", events[-1]["rid"])]  # only the 500
    assert 'rvguard_client_errors_total{basis="floor",tenant="assured"} 1.0' in metrics
    assert 'rvguard_failed_total{basis="floor",tenant="assured"} 1.0' in metrics


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


_KNOWN = [
    "prompt",
    "messages",
    "model",
    "max_tokens",
    "min_tokens",
    "n",
    "stream",
    "stop",
    "logprobs",
    "seed",
]
_BODIES = st.dictionaries(st.sampled_from(_KNOWN), _JSONISH, max_size=5).map(lambda d: json.dumps(d).encode())


@hsettings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=200) | _BODIES)
def test_parse_and_check_raise_only_bad_request(raw: bytes) -> None:
    """Whatever the bytes, the edge either accepts a dict or raises its own `BadRequest`."""
    statuses = []
    try:
        body = parse_json(raw)
        for endpoint in ("completions", "chat"):
            check_body(body, endpoint)
            check_min_tokens(body, 8)  # the cap of the request's facts, read once the body passed
    except BadRequest as err:
        statuses.append(err.status)
    assert all(400 <= s < 500 for s in statuses)


def test_the_kernel_wait_is_read_from_tcp_and_is_zero_where_it_cannot_be_known() -> None:
    import socket

    from rvguard.gateway.server import kernel_wait

    class Transport:
        def __init__(self, sock: object) -> None:
            self.sock = sock

        def get_extra_info(self, name: str) -> object:
            return self.sock if name == "socket" else None

    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname())
        client.sendall(b"GET / HTTP/1.1\r\n\r\n")
        sent = time.monotonic()
        time.sleep(0.1)
        conn, _ = srv.accept()
        with client, conn:
            waited = kernel_wait(Transport(conn))  # type: ignore[arg-type]
            elapsed = time.monotonic() - sent
    assert elapsed - 0.021 <= waited <= elapsed  # one tick (<= 10 ms) off, and one of rounding
    a, b = socket.socketpair()  # a Unix socket: no TCP_INFO
    with a, b:
        assert kernel_wait(Transport(a)) == 0.0  # type: ignore[arg-type]
    assert kernel_wait(Transport(None)) == 0.0  # type: ignore[arg-type]
