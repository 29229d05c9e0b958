"""The watch at the boundary: a slow upstream breaks the envelope; the trace, the log and /metrics
say so, `rvguard check` blames the broken precondition, and ``--degrade`` lowers the floor on record."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest

from rvguard.check import check_trace
from rvguard.cli.program import main
from rvguard.enforce.watch import WatchConfig
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings

# s_max 0.4 s, deadline 0.6 s; the fake answers 8 tokens at 0.1 s each: 0.8 s, twice the ceiling
SLOW = {"s_max": 0.4, "s_max_opp": 0.4, "lower": 0.001, "upper": None}
TENANTS = {
    "assured": {"floor": 2, "deadline": 0.6, "tier": 0},
    "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
}


async def _run(tmp_path: Path, n: int, **over: object) -> tuple[Path, str]:
    """``n`` assured requests to a gateway in front of the slow fake; the trace and /metrics."""
    trace = tmp_path / "trace.jsonl"
    c = contract(service=SLOW, tenants=TENANTS)
    async with (
        FakeUpstream(model="tiny", token_delay=0.1) as up,
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
        FakeUpstream(model="tiny", token_delay=0.1) as up,
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
