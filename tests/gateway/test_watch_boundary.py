"""The watch at the boundary: a slow upstream breaks the envelope; the trace, the log and /metrics
say so, `rvguard check` blames the broken precondition, and ``--degrade`` lowers the floor on record."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from rvguard.check import check_trace
from rvguard.cli.program import main
from rvguard.enforce.watch import WatchConfig
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings, stream_then_leave

# s_max 0.4 s, deadline 0.8 s (covers a backlog of 4 ≥ B: one wave after a blocking job, so the
# service is the only precondition to break); the fake answers 8 tokens at 0.15 s each: 1.2 s, three
# times the ceiling
SLOW = {"s_max": 0.4, "s_max_opp": 0.4, "lower": 0.001, "upper": None}
TENANTS = {
    "assured": {"floor": 2, "deadline": 0.8, "tier": 0},
    "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
}


async def _run(tmp_path: Path, n: int, **over: object) -> tuple[Path, str]:
    """``n`` assured requests to a gateway in front of the slow fake; the trace and /metrics."""
    trace = tmp_path / "trace.jsonl"
    c = contract(service=SLOW, tenants=TENANTS)
    async with (
        FakeUpstream(model="tiny", token_delay=0.15) as up,
        gateway(c, settings(up.url, trace, **over)) as (_gw, url),
        httpx.AsyncClient(timeout=30) as client,
    ):
        body = {"model": "tiny", "prompt": "x", "max_tokens": 8}
        for _ in range(n):
            await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        text = (await client.get(url + "/metrics")).text
    return trace, text


async def test_a_slow_upstream_is_an_alert_in_the_trace_the_log_and_metrics(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="rvguard.watch")
    trace, metrics = await _run(tmp_path, 3)
    alerts = [r for r in read_trace(trace) if r["kind"] == "alert"]
    assert alerts and all(a["condition"] == "service" for a in alerts)
    assert all("rid" not in a and a["value"] > a["bound"] == 0.4 for a in alerts)
    assert all(a["since"] < a["t"] for a in alerts)  # the breach began at dispatch + s_max
    warned = [r for r in caplog.records if r.name == "rvguard.watch" and r.levelno == logging.WARNING]
    assert len(warned) == len(alerts) and "precondition service" in warned[0].getMessage()
    line = [ln for ln in metrics.splitlines() if ln.startswith("rvguard_precondition_alerts_total")]
    assert line == [f'rvguard_precondition_alerts_total{{condition="service"}} {float(len(alerts))}']


async def test_check_blames_the_broken_precondition_not_the_guard(tmp_path: Path) -> None:
    trace, _ = await _run(tmp_path, 3)
    c = contract(service=SLOW, tenants=TENANTS)
    report = check_trace(str(trace), c)
    sf = report.sf_attribution()
    assert sf["guard_fault"] == 0 and sf["precondition_broken"] == 3, report.to_dict()
    assert not report.violations and report.holds
    assert {a.condition for a in report.attributed} == {"service"}
    assert all(a.cause == "precondition" and a.source == "watch" for a in report.attributed)
    spec = tmp_path / "c.json"
    spec.write_text(c.model_dump_json())
    assert main(["check", str(trace), "--contract", str(spec)]) == 3  # attributed, not a guard fault


async def test_degrade_lowers_the_floor_on_record_and_af_is_judged_against_it(tmp_path: Path) -> None:
    """floor 2, degrade 0.5: after the first slow service the floor is 1 a window; the refusals
    past it are declared exceptions, not violations, and the trace carries the lowered floor."""
    trace = tmp_path / "trace.jsonl"
    c = contract(service=SLOW, tenants=TENANTS, window=10.0)  # one window for the whole test
    async with (
        FakeUpstream(model="tiny", token_delay=0.15) as up,
        gateway(c, settings(up.url, trace, watch=WatchConfig(degrade=0.5))) as (_gw, url),
        httpx.AsyncClient(timeout=30) as client,
    ):
        body = {"model": "tiny", "prompt": "x", "max_tokens": 8}
        await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))  # alert
        # three at once in the same window, against the lowered floor of 1 (the first used it)
        posts = [
            client.post(url + "/v1/completions", json=body, headers=auth("sk-assured")) for _ in range(3)
        ]
        answers = await asyncio.gather(*posts)
    records = read_trace(trace)
    scaled = [r for r in records if r["kind"] == "alert" and r.get("floor_scale") == 0.5]
    assert scaled, "the lowered floor is a trace record"
    refused = [r for r in records if r["kind"] == "reject" and r.get("floor_refused") == "floor-lowered"]
    assert len(refused) == 1 and sum(a.status_code != 200 for a in answers) == 3
    report = check_trace(str(trace), c, properties=["AF", "WF"])
    assert not report.violations, report.to_dict()["violations"]
    declared = [a for a in report.attributed if a.violation.property == "AF"]
    assert len(declared) == len(refused) and all(a.cause == "declared" for a in declared)


async def test_a_client_hang_up_mid_stream_is_a_client_fault_never_an_sf_guard_fault(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    c = contract()  # deadline 1.5 s: the answer would have been on time
    async with (
        FakeUpstream(model="tiny", token_delay=0.05) as up,
        gateway(c, settings(up.url, trace)) as (gw, url),
        httpx.AsyncClient(timeout=10) as client,
    ):
        body = {"model": "tiny", "prompt": "x", "max_tokens": 20, "stream": True}
        assert await stream_then_leave(client, url, body, "sk-assured") == 3
        for _ in range(100):
            if gw.guard.statistics().live == 0:
                break
            await asyncio.sleep(0.02)
    fails = [r for r in read_trace(trace) if r["kind"] == "fail"]
    assert [f["reason"] for f in fails] == ["client-error: disconnect"]
    report = check_trace(str(trace), c)
    assert report.holds and report.sf_attribution() == {
        "guard_fault": 0,
        "precondition_broken": 0,
        "client_fault": 1,
    }


async def test_a_lone_surrogate_is_refused_at_the_edge_before_admission(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    c = contract()
    async with (
        FakeUpstream(model="tiny") as up,
        gateway(c, settings(up.url, trace)) as (gw, url),
        httpx.AsyncClient(timeout=10) as client,
    ):
        raw = b'{"model": "tiny", "prompt": "\\ud800", "max_tokens": 3}'
        headers = {**auth("sk-assured"), "content-type": "application/json"}
        r = await client.post(url + "/v1/completions", content=raw, headers=headers)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_unicode"
        # a surrogate pair is a character: served
        pair = b'{"model": "tiny", "prompt": "\\ud83d\\ude00", "max_tokens": 3}'
        assert (await client.post(url + "/v1/completions", content=pair, headers=headers)).status_code == 200
        assert len(up.bodies) == 1 and gw.guard.statistics().submitted == 1
    arrivals = [r for r in read_trace(trace) if r["kind"] == "arrive"]
    assert len(arrivals) == 1  # the refused one spent no credit: it never arrived


async def test_the_arrival_is_dated_from_the_first_byte_and_a_starved_gateway_is_an_alert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rvguard.gateway.app as app

    trace = tmp_path / "trace.jsonl"
    c = contract()
    real = app.check_body

    def starved(*args: object, **kw: object) -> None:
        time.sleep(0.2)  # the event loop is blocked between the first byte and the handler's decision
        real(*args, **kw)  # type: ignore[arg-type]

    async with (
        FakeUpstream(model="tiny") as up,
        gateway(c, settings(up.url, trace)) as (_gw, url),
        httpx.AsyncClient(timeout=10) as client,
    ):
        body = {"model": "tiny", "prompt": "x", "max_tokens": 3}
        assert (
            await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        ).status_code == 200
        monkeypatch.setattr(app, "check_body", starved)
        assert (
            await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        ).status_code == 200
    records = read_trace(trace)
    fed, starved_arrival = [r for r in records if r["kind"] == "arrive"]
    assert 0 <= fed["arrival_gap"] < 0.05 <= 0.2 <= starved_arrival["arrival_gap"]
    # the deadline runs from the first byte: t + D less the gap
    assert starved_arrival["deadline"] == pytest.approx(
        starved_arrival["t"] + 1.5 - starved_arrival["arrival_gap"], abs=0.02
    )
    gaps = [r for r in records if r["kind"] == "alert" and r["condition"] == "arrival-gap"]
    assert len(gaps) == 1 and gaps[0]["value"] >= 0.2 and gaps[0]["bound"] == 0.05


def test_degrade_is_a_serve_option_and_a_contract_field() -> None:
    import argparse

    from rvguard.errors import SpecError
    from rvguard.gateway.cli import _watch

    def ns(degrade: float | None) -> argparse.Namespace:
        return argparse.Namespace(alert_log=None, degrade=degrade)

    assert _watch(ns(None), contract()).degrade is None  # never lowered unless declared
    assert _watch(ns(0.5), contract()).degrade == 0.5
    assert _watch(ns(None), contract(degrade=0.25)).degrade == 0.25  # the contract's
    assert _watch(ns(0.5), contract(degrade=0.25)).degrade == 0.5  # the flag wins
    with pytest.raises(SpecError, match="--degrade"):
        _watch(ns(1.5), contract())


async def test_every_condition_at_the_boundary_is_traced_and_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One slot, 0.4 s services against s_max 0.3 s, two assured a half-second window (4/s against a
    capacity of 2.5/s): service, backlog and capacity alerts; then an engine faster than L."""
    caplog.set_level(logging.WARNING, logger="rvguard.watch")
    trace = tmp_path / "trace.jsonl"
    service = {"s_max": 0.3, "s_max_opp": 0.3, "lower": 0.001, "upper": None}
    tenants = {
        "assured": {"floor": 2, "deadline": 10.0, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    }
    c = contract(service=service, tenants=tenants, slots=1, window=0.5)
    async with (
        FakeUpstream(model="tiny", token_delay=0.05) as up,
        gateway(c, settings(up.url, trace)) as (_gw, url),
        httpx.AsyncClient(timeout=30) as client,
    ):
        body = {"model": "tiny", "prompt": "x", "max_tokens": 8}
        posts = []
        for _ in range(4):
            posts += [
                client.post(url + "/v1/completions", json=body, headers=auth("sk-assured")) for _ in range(2)
            ]
            posts = [asyncio.ensure_future(p) for p in posts]
            await asyncio.sleep(0.5)
        assert all(r.status_code == 200 for r in await asyncio.gather(*posts))
    seen = {r["condition"] for r in read_trace(trace) if r["kind"] == "alert"}
    assert {"service", "backlog", "capacity"} <= seen, seen
    warned = {r.getMessage().split()[1].rstrip(":") for r in caplog.records if r.levelno == logging.WARNING}
    assert {"service", "backlog", "capacity"} <= warned, warned
    # an engine faster than L: the DR assumption, said too (L = 0.2 s, the fake answers at once)
    low = tmp_path / "low.jsonl"
    quick = contract(service={"s_max": 0.4, "s_max_opp": 0.4, "lower": 0.2, "upper": None})
    async with (
        FakeUpstream(model="tiny") as up,
        gateway(quick, settings(up.url, low)) as (_gw, url),
        httpx.AsyncClient(timeout=30) as client,
    ):
        body = {"model": "tiny", "prompt": "x", "max_tokens": 2}
        assert (
            await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        ).status_code == 200
    assert [r["condition"] for r in read_trace(low) if r["kind"] == "alert"] == ["service-low"]
    assert any("precondition service-low" in r.getMessage() for r in caplog.records)


async def test_bytes_that_waited_in_the_kernel_for_a_starved_loop_date_the_arrival_back(
    tmp_path: Path,
) -> None:
    """The gateway's loop is blocked while a client's request sits in the kernel, before the gateway
    reads it: the wait is seen in the socket's ``TCP_INFO`` and recorded as the arrival gap (the
    handler's clock alone saw nothing: the read and the handler ran back to back)."""
    trace = tmp_path / "trace.jsonl"
    blocked = 0.3
    body = json.dumps({"model": "tiny", "prompt": "x", "max_tokens": 3}).encode()
    head = (
        "POST /v1/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer sk-assured\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )

    def send_while_the_loop_sleeps(url: str, loop: asyncio.AbstractEventLoop, starve: bool) -> bytes:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            if starve:
                asleep = threading.Event()
                loop.call_soon_threadsafe(lambda: (asleep.set(), time.sleep(blocked)))
                asleep.wait(5)
            sock.sendall(head.encode() + body)  # in the kernel now, whatever the gateway's loop does
            return b"".join(iter(lambda: sock.recv(65536), b""))

    async with FakeUpstream(model="tiny") as up, gateway(contract(), settings(up.url, trace)) as (_gw, url):
        loop = asyncio.get_running_loop()
        for starve in (False, True):
            answer = await asyncio.to_thread(send_while_the_loop_sleeps, url, loop, starve)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    fed, starved = [r for r in read_trace(trace) if r["kind"] == "arrive"]
    assert fed["arrival_gap"] < 0.05
    assert blocked - 0.03 <= starved["arrival_gap"] <= blocked + 0.05  # kernel ticks: 1 to 10 ms
