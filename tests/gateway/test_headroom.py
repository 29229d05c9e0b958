"""The gateway's redline on the engine's /metrics (the fake upstream's vLLM gauges): surplus demoted
while the KV cache is nearly full, restored after, preempted past the hard floor with a 503."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.errors import SpecError
from rvguard.gateway.app import Gateway
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings, terminal_counts

REDLINE = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)
LONG = {"model": "fake", "prompt": "long answer", "max_tokens": 90}


async def _until(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(600):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def _samples(gw: Gateway) -> int:
    return 0 if gw.guard.headroom is None else gw.guard.headroom.samples


async def test_surplus_is_demoted_while_the_cache_is_nearly_full_and_restored_after(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    async with FakeUpstream(token_delay=0.002, metrics=True) as up:
        s = settings(up.url, trace, redline=REDLINE, headroom_url=up.url + "/metrics", headroom_interval=0.02)
        async with gateway(contract(), s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            up.kv_usage = 0.0
            await _until(lambda: _samples(gw) >= 1, "a first scrape")
            up.kv_usage = 0.9  # headroom 0.1 < h_min
            seen = _samples(gw)
            await _until(lambda: _samples(gw) > seen + 1, "the redline to see it")
            opp = asyncio.ensure_future(
                client.post(url + "/v1/completions", json=LONG, headers=auth("sk-opp"))
            )
            await _until(lambda: gw.guard.core.held == 1, "the surplus request held")
            ok = await client.post(url + "/v1/completions", json=LONG, headers=auth("sk-assured"))
            assert ok.status_code == 200  # floor work is served while surplus waits
            firing = (await client.get(url + "/metrics")).text
            assert "rvguard_redline_firing 1.0" in firing
            assert not opp.done()
            up.kv_usage = 0.2
            assert (await opp).status_code == 200
            text = (await client.get(url + "/metrics")).text
    events = read_trace(trace)
    kinds = [e["kind"] for e in events if e.get("rid") == "g0"]
    assert kinds == ["arrive", "admit", "demote", "restore", "dispatch", "complete"]
    demote = next(e for e in events if e["kind"] == "demote")
    assert demote["resource"] == "kv_cache"
    assert any(e["kind"] == "sample" and e["sample_time"] == demote["sample_time"] for e in events)
    assert set(terminal_counts([e for e in events if "rid" in e]).values()) == {1}
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["rvguard_demotions"].samples[0].value == 1.0
    assert fams["rvguard_headroom"].samples[0].labels == {"resource": "kv_cache"}


async def test_past_the_hard_floor_a_running_surplus_request_gets_503(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    async with FakeUpstream(token_delay=0.05, metrics=True) as up:
        s = settings(up.url, trace, redline=REDLINE, headroom_url=up.url + "/metrics", headroom_interval=0.02)
        async with gateway(contract(), s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            opp = asyncio.ensure_future(
                client.post(url + "/v1/completions", json=LONG, headers=auth("sk-opp"))
            )
            await _until(lambda: bool(gw.guard.running()), "the surplus request to run")
            up.kv_usage = 0.99
            answer = await opp
    assert answer.status_code == 503 and "retry-after" in answer.headers
    fails = [e for e in read_trace(trace) if e["kind"] == "fail"]
    assert [f["reason"] for f in fails] == ["preempted"]


def test_headroom_without_a_redline_is_refused() -> None:
    with pytest.raises(SpecError, match="headroom block"):
        settings("http://127.0.0.1:9", None, headroom_url="http://127.0.0.1:9/metrics")


def test_serve_headroom_reads_the_contracts_block() -> None:
    import argparse

    from rvguard.gateway.cli import _headroom

    block = {"staleness": 5.0, "alpha": 0.4, "resources": {"kv_cache": {"h_min": 0.2, "hard_floor": 0.05}}}
    with_block = contract(headroom=block)
    args = argparse.Namespace(headroom="", upstream=["http://127.0.0.1:8000/"], headroom_interval=0.5)
    got = _headroom(args, with_block)
    assert got["headroom_url"] == "http://127.0.0.1:8000/metrics" and got["headroom_interval"] == 0.5
    assert got["redline"].alpha == 0.4 and got["redline"].resources[0].hard_floor == 0.05
    assert _headroom(argparse.Namespace(headroom=None), with_block) == {}
    with pytest.raises(SpecError, match="headroom block"):
        _headroom(args, contract())
    two = argparse.Namespace(headroom="", upstream=["a=http://h:1", "b=http://h:2"], headroom_interval=1.0)
    with pytest.raises(SpecError, match="one engine"):
        _headroom(two, with_block)


async def test_the_alert_log_of_serve_feeds_review(tmp_path: Path) -> None:
    """--alert-log: the watch's alerts as JSON lines; `rvguard review TRACE LOG` counts them."""
    import argparse

    from rvguard.cli import main
    from rvguard.gateway.cli import _watch

    trace, log = tmp_path / "t.jsonl", tmp_path / "alerts.jsonl"
    quiet = _watch(argparse.Namespace(alert_log=None, degrade=None), contract())  # the watch always runs
    assert quiet.on_alert is None and quiet.degrade is None
    async with FakeUpstream(token_delay=0.01) as up:
        s = settings(
            up.url, trace, watch=_watch(argparse.Namespace(alert_log=str(log), degrade=None), contract())
        )
        async with gateway(contract(), s) as (_gw, url), httpx.AsyncClient(timeout=30) as client:
            slow = await client.post(url + "/v1/completions", json=LONG, headers=auth("sk-assured"))
            assert slow.status_code == 200  # 90 tokens × 10 ms: above s_max = 0.4 s
    spec = tmp_path / "c.json"
    spec.write_text(contract().model_dump_json())
    assert main(["review", str(trace), str(log), "--contract", str(spec)]) == 1
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines and lines[0]["kind"] == "service" and lines[0]["limit"] == 0.4
