"""A request held by the redline gets an answer within the hold bound (issue 24): 503 with a retry
signal through the gateway, against the fake upstream's vLLM gauges, instead of waiting for its
client's own time-out while the cache stays full."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from rvguard.enforce.rationing import ReliefConfig
from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.errors import SpecError
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings, terminal_counts

REDLINE = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)
LONG = {"model": "fake", "prompt": "long answer", "max_tokens": 90}
BOUND = 0.3


async def _until(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(600):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_request_held_past_the_bound_gets_503_with_a_retry_signal(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    async with FakeUpstream(token_delay=0.002, metrics=True) as up:
        relief = ReliefConfig(capacity=1000, hold_bound=BOUND)
        s = settings(
            up.url,
            trace,
            redline=REDLINE,
            headroom_url=up.url + "/metrics",
            headroom_interval=0.02,
            relief=relief,
        )
        async with gateway(contract(), s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            assert gw.guard.headroom is not None and gw.guard.headroom.relief == relief
            up.kv_usage = 0.9  # headroom 0.1 < h_min, fresh on every scrape: the redline keeps firing
            await _until(lambda: gw.guard.core.redline is not None and gw.guard.core.redline.firing, "firing")
            started = time.monotonic()
            answer = await asyncio.wait_for(
                client.post(url + "/v1/completions", json=LONG, headers=auth("sk-opp")), 10.0
            )
            waited = time.monotonic() - started
            ok = await client.post(url + "/v1/completions", json=LONG, headers=auth("sk-assured"))
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "hold-bound"
    assert answer.headers["x-should-retry"] == "true" and "retry-after" in answer.headers
    assert BOUND <= waited < BOUND + 2.0  # answered at the bound (plus a poll), not at a client time-out
    assert ok.status_code == 200  # floor work is never held, nor answered at the bound
    events = read_trace(trace)
    kinds = [e["kind"] for e in events if e.get("rid") == "g0"]
    assert kinds == ["arrive", "admit", "demote", "fail"]
    fail = next(e for e in events if e["kind"] == "fail")
    assert fail["reason"] == "hold-bound" and fail["t"] - fail["held_since"] >= BOUND
    assert set(terminal_counts([e for e in events if "rid" in e]).values()) == {1}


def test_serve_rations_relief_from_its_options() -> None:
    import argparse

    from rvguard.gateway.cli import _headroom

    block = {"staleness": 5.0, "resources": {"kv_cache": {"h_min": 0.2, "hard_floor": 0.05}}}
    common = {"headroom": "", "upstream": ["http://127.0.0.1:8000/"], "headroom_interval": 0.5}
    got = _headroom(
        argparse.Namespace(**common, relief_capacity=16384, hold_bound=4.0), contract(headroom=block)
    )
    assert got["relief"] == ReliefConfig(16384, hold_bound=4.0)
    got = _headroom(
        argparse.Namespace(**common, relief_capacity=None, hold_bound=4.0), contract(headroom=block)
    )
    assert got["relief"] is None
    with pytest.raises(SpecError, match="needs --headroom"):
        _headroom(argparse.Namespace(headroom=None, relief_capacity=100), contract(headroom=block))
    with pytest.raises(SpecError, match="headroom telemetry"):
        settings("http://127.0.0.1:9", None, redline=REDLINE, relief=ReliefConfig(100))


async def test_bare_preemption_keeps_the_gateway_from_rationing_by_default(tmp_path: Path) -> None:
    """``--bare-preemption`` (the comparison arm of benchmarks/bench_relief_livelock.py): the headroom
    loop never rations, even once the engine states its cache's size; by default it would."""
    import argparse

    from rvguard.gateway.cli import _headroom

    block = {"staleness": 5.0, "resources": {"kv_cache": {"h_min": 0.2, "hard_floor": 0.05}}}
    common = {"headroom": "", "upstream": ["http://127.0.0.1:8000/"], "headroom_interval": 0.5}
    got = _headroom(
        argparse.Namespace(**common, relief_capacity=None, hold_bound=4.0, bare_preemption=True),
        contract(headroom=block),
    )
    assert got["bare_preemption"] is True and got["relief"] is None
    with pytest.raises(SpecError, match="needs --headroom"):
        _headroom(argparse.Namespace(headroom=None, bare_preemption=True), contract(headroom=block))
    with pytest.raises(SpecError, match="excludes rationed relief"):
        settings("http://127.0.0.1:9", None, redline=REDLINE, headroom_url="http://127.0.0.1:9/metrics",
                 relief=ReliefConfig(100), bare_preemption=True)  # fmt: skip
    async with FakeUpstream(metrics=True) as up:
        for bare in (False, True):
            s = settings(
                up.url, tmp_path / f"{bare}.jsonl", redline=REDLINE, headroom_url=up.url + "/metrics"
            )
            async with gateway(contract(), replace(s, bare_preemption=bare)) as (gw, _url):
                loop = gw.guard.headroom
                assert loop is not None and loop.ration_by_default is not bare and loop.relief is None
