"""HTTP edges: credentials named twice, both body framings, and how `rvguard serve` stops on a signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from rvguard.gateway.fake import FakeUpstream

from ..gzip_bomb import gzip_bomb
from ._support import KEYS, SECRET, contract, contract_data, gateway, read_trace, settings, socket_port
from .test_edge import _raw

_BODY = json.dumps({"prompt": "hello", "max_tokens": 2}).encode()


@pytest.mark.parametrize("order", [("sk-assured", "sk-opp"), ("sk-opp", "sk-assured")])
async def test_a_duplicated_authorization_header_is_400_and_never_arrives(
    tmp_path: Path, order: tuple[str, str]
) -> None:
    """Before: the first one won (a proxy taking the last would see another tenant)."""
    async with FakeUpstream() as up, gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_, url):
        head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        auth = b"".join(b"authorization: Bearer %s\r\n" % key.encode() for key in order)
        got, took = await _raw(url, head + auth + b"content-length: %d\r\n\r\n" % len(_BODY) + _BODY)
    assert got.startswith(b"HTTP/1.1 400") and took < 2.0  # closed after the answer
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "duplicate_header"
    assert [e for e in read_trace(tmp_path / "t.jsonl") if e["kind"] == "arrive"] == []


async def test_content_length_beside_chunked_is_answered_then_closed(tmp_path: Path) -> None:
    """RFC 9112 §6.1. Before: served and kept open (the read below waited for the idle timeout)."""
    async with FakeUpstream() as up, gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_, url):
        head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-opp\r\n"
        framing = b"content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n"
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(_BODY), _BODY)
        got, took = await _raw(url, head + framing + chunked, wait=3.0)
        plain, _ = await _raw(
            url, head + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(_BODY) + _BODY
        )
    status, rest = got.split(b"\r\n", 1)
    assert status == b"HTTP/1.1 200 OK" and b"connection: close" in rest.split(b"\r\n\r\n")[0].lower()
    assert took < 2.0 and plain.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_serve_stops_cleanly_on_sigint_as_on_sigterm(tmp_path: Path, sig: signal.Signals) -> None:
    """Before: SIGINT printed a KeyboardInterrupt traceback (and SIGTERM died of its signal)."""
    spec, keys = tmp_path / "c.yaml", tmp_path / "k.yaml"
    spec.write_text(yaml.safe_dump(contract_data(contract())))
    keys.write_text(yaml.safe_dump({"keys": KEYS, "claim_secret": SECRET.decode()}))
    with socket_port() as port:
        pass
    async with FakeUpstream() as up:
        cmd = [sys.executable, "-m", "rvguard.cli", "serve", str(spec), "--upstream", up.url]
        cmd += ["--port", str(port), "--keys", str(keys), "--trace", str(tmp_path / "t.jsonl")]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            async with httpx.AsyncClient(timeout=1.0) as client:
                for _ in range(300):
                    try:
                        if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        time.sleep(0.1)
            os.kill(proc.pid, sig)
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert f"stopped ({sig.name})" in err


async def test_a_gzip_bomb_body_is_never_inflated(tmp_path: Path) -> None:
    """Why a gzip bomb did no harm: Starlette hands the body over as sent and the gateway never
    decodes a Content-Encoding, so the bomb is its compressed size (bounded by --max-body) and
    not JSON: 400 at once. (Scrapes of /metrics ask for identity and refuse a compressed answer:
    tests/enforce/test_scrape_bounds.py.)"""
    bomb = gzip_bomb(b"", b" ", 512)  # 512 MiB inflated
    headers = {"authorization": "Bearer sk-opp", "content-encoding": "gzip"}
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_, url),
        httpx.AsyncClient(timeout=10.0) as client,
    ):
        start = time.monotonic()
        answer = await client.post(url + "/v1/completions", content=bomb, headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_json"
    assert time.monotonic() - start < 2.0 and len(bomb) < 1 << 20
