"""What operators see: /metrics (scraped with prometheus_client's parser), /readyz, the log, the trace."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rvguard.errors import SpecError
from rvguard.gateway.app import Gateway
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.logs import JsonFormatter, TextFormatter

from ._support import auth, contract, gateway, read_trace, readyz_until, settings


def scrape(text: str) -> dict[str, Any]:
    """family name → {"type", "samples": {(sample name, frozen labels): value}}."""
    out: dict[str, Any] = {}
    for fam in text_string_to_metric_families(text):
        samples = {(s.name, frozenset(s.labels.items())): s.value for s in fam.samples}
        out[fam.name] = {"type": fam.type, "samples": samples}
    return out


def value(families: dict[str, Any], family: str, sample: str, **labels: str) -> float | None:
    return families[family]["samples"].get((sample, frozenset(labels.items())))


async def test_metrics_show_the_slo_and_follow_prometheus_conventions(tmp_path: Path) -> None:
    c = contract()  # assured: floor 2, deadline 1.5 s; opportunistic: deadline 60 s
    async with (
        FakeUpstream(model="tiny") as up,
        gateway(c, settings(up.url, None, read_timeout=0.3)) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        for prompt, key in (
            ("x", "sk-assured"),
            ("x", "sk-assured"),
            ("x", "sk-assured"),
            ("hang", "sk-opp"),
        ):
            body = {"model": "tiny", "prompt": prompt, "max_tokens": 3}
            await client.post(url + "/v1/completions", json=body, headers=auth(key))
        await client.post(url + "/v1/completions", json={"prompt": "422"}, headers=auth("sk-opp"))
        await client.post(url + "/v1/completions", content=b"{", headers=auth("sk-opp"))
        text = (await client.get(url + "/metrics")).text
    fams = scrape(text)
    for name, fam in fams.items():  # a counter's samples are name_total (and name_created)
        if fam["type"] == "counter":
            assert all(s.endswith(("_total", "_created")) for s, _ in fam["samples"]), name
    counters = {n for n, f in fams.items() if f["type"] == "counter"}
    assert {"rvguard_watch_alerts", "rvguard_uncertain_dispatches", "rvguard_sink_errors"} <= counters
    a = {"tenant": "assured", "basis": "floor"}
    assert value(fams, "rvguard_deadline_met", "rvguard_deadline_met_total", **a) == 2
    assert (
        value(
            fams,
            "rvguard_deadline_missed",
            "rvguard_deadline_missed_total",
            tenant="opportunistic",
            basis="surplus",
        )
        == 1
    )
    assert value(fams, "rvguard_floor_attainment", "rvguard_floor_attainment", tenant="assured") == 1.0
    assert (
        value(fams, "rvguard_floor_refused", "rvguard_floor_refused_total", tenant="assured", reason="excess")
        == 1
    )
    assert (
        value(
            fams,
            "rvguard_client_errors",
            "rvguard_client_errors_total",
            tenant="opportunistic",
            basis="surplus",
        )
        == 1
    )
    assert value(fams, "rvguard_invalid_requests", "rvguard_invalid_requests_total", code="invalid_json") == 1
    buckets = {
        dict(labels)["le"]
        for s, labels in fams["rvguard_sojourn_seconds"]["samples"]
        if s.endswith("_bucket")
    }
    assert {"1.5", "60.0"} <= buckets  # a bucket at each tenant's deadline
    tm = {"tenant": "assured", "model": "tiny"}
    assert (
        value(fams, "rvguard_time_to_first_token_seconds", "rvguard_time_to_first_token_seconds_count", **tm)
        == 2
    )
    assert (
        value(fams, "rvguard_upstream_latency_seconds", "rvguard_upstream_latency_seconds_count", **tm) == 2
    )
    assert value(fams, "rvguard_generation_tokens", "rvguard_generation_tokens_total", **tm) == 6
    assert value(fams, "rvguard_prompt_tokens", "rvguard_prompt_tokens_total", **tm) == 10
    assert value(fams, "rvguard_upstream_up", "rvguard_upstream_up") == 1


async def test_readyz_fails_while_the_upstream_is_down_healthz_stays_live(tmp_path: Path) -> None:
    async with (
        FakeUpstream() as up,
        httpx.AsyncClient() as client,
        gateway(contract(), settings(up.url, None, probe_interval=0.05)) as (_gw, url),
    ):
        ready = await readyz_until(client, url, 200)
        await up.kill()
        down = await readyz_until(client, url, 503)
        live = await client.get(url + "/healthz")
        await up.start()
        back = await readyz_until(client, url, 200)
    assert ready.status_code == 200 and ready.json()["checks"]["upstream"] is True
    assert down.status_code == 503 and down.json()["checks"] == {
        "serving": True,
        "upstream": False,
        "trace": True,
    }
    assert down.json()["error"]["code"] == "not_ready"
    assert live.status_code == 200 and back.status_code == 200


async def test_a_failing_trace_serves_the_answer_and_is_loud(caplog: pytest.LogCaptureFixture) -> None:
    """Before: 502 "upstream_error" with an object repr, the upstream's answer thrown away, nothing else."""
    caplog.set_level(logging.INFO, logger="rvguard.gateway")
    full = Path("/dev/full")  # every write: ENOSPC, as a full disk
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, full, probe_interval=0.05)) as (gw, url),
        httpx.AsyncClient() as client,
    ):
        r = await client.post(
            url + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, headers=auth("sk-assured")
        )
        ready = await client.get(url + "/readyz")
        fams = scrape((await client.get(url + "/metrics")).text)
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "t0 t1 "
    assert ready.status_code == 503 and ready.json()["checks"]["trace"] is False
    assert (
        value(fams, "rvguard_sink_errors", "rvguard_sink_errors_total") == 4
    )  # arrive admit dispatch complete
    assert value(fams, "rvguard_trace_failing", "rvguard_trace_failing") == 1
    errors = [rec for rec in caplog.records if getattr(rec, "event", "") == "sink_error"]
    # the segment header at start-up, then arrive admit dispatch complete
    assert len(errors) == 5 and all(rec.levelno == logging.ERROR for rec in errors)
    assert gw.guard.statistics().live == 0


def test_a_trace_that_holds_events_is_never_truncated(tmp_path: Path) -> None:
    """Before: restarting with the same --trace truncated it to 0 lines without a word."""
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"t":0.0,"kind":"arrive","rid":"g0","tenant":"assured"}\n')
    before = trace.read_bytes()
    with pytest.raises(SpecError, match="already holds events"):
        Gateway(contract(), settings("http://127.0.0.1:9", trace))
    assert trace.read_bytes() == before
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    Gateway(contract(), settings("http://127.0.0.1:9", empty)).trace.close()  # an empty file is used


async def test_refusals_and_failures_are_logged_once_with_ids(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rvguard.gateway")
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        ids = {"x-request-id": "abc-123", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
        bad = await client.post(
            url + "/v1/completions", json={"prompt": ["a", "b"]}, headers={**auth("sk-opp"), **ids}
        )
        failed = await client.post(
            url + "/v1/completions", json={"prompt": "500"}, headers=auth("sk-assured")
        )
        nobody = await client.post(url + "/v1/completions", json={"prompt": "x"})
        ok = await client.post(
            url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, headers={**auth("sk-opp"), **ids}
        )
    events = {getattr(r, "event", ""): r for r in caplog.records if r.name == "rvguard.gateway"}
    [refused] = [r for r in caplog.records if getattr(r, "status", 0) == 400 and r.event == "refused"]  # type: ignore[attr-defined]
    assert (refused.request_id, refused.tenant, refused.status) == ("abc-123", "opportunistic", 400)  # type: ignore[attr-defined]
    upstream = events["upstream_failed"]
    assert upstream.levelno == logging.WARNING and upstream.tenant == "assured"  # type: ignore[attr-defined]
    assert upstream.request_id == failed.headers["x-request-id"]  # type: ignore[attr-defined]
    assert bad.headers["x-request-id"] == ok.headers["x-request-id"] == "abc-123"
    assert nobody.status_code == 401 and nobody.headers["x-request-id"].startswith("req-")
    sent = up.headers[-1]
    assert sent["x-request-id"] == "abc-123" and sent["traceparent"] == ids["traceparent"]
    assert (
        up.headers[0]["traceparent"].startswith("00-")
        and up.headers[0]["x-request-id"] == failed.headers["x-request-id"]
    )
    arrivals = [e for e in read_trace(tmp_path / "t.jsonl") if e["kind"] == "arrive"]
    assert [e["request_id"] for e in arrivals] == [failed.headers["x-request-id"], "abc-123"]
    assert arrivals[1]["traceparent"] == ids["traceparent"]


def test_log_lines_are_one_line_each_in_both_formats() -> None:
    rec = logging.LogRecord("rvguard.gateway", logging.WARNING, "f", 1, "upstream failed\nfor real", (), None)
    rec.__dict__.update(event="upstream_failed", request_id="r 1", tenant="assured", status=502)
    line = JsonFormatter().format(rec)
    assert "\n" not in line
    data = json.loads(line)
    assert (data["level"], data["event"], data["request_id"], data["status"]) == (
        "WARNING",
        "upstream_failed",
        "r 1",
        502,
    )
    text = TextFormatter().format(rec)
    assert "\n" not in text and 'request_id="r 1"' in text and "status=502" in text and "WARNING" in text


async def test_the_upstream_key_is_sent_and_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with FakeUpstream(api_key="sk-engine-secret") as up, httpx.AsyncClient() as client:
        async with gateway(contract(), settings(up.url, None, upstream_api_key="sk-engine-secret")) as (
            _gw,
            url,
        ):
            ok = await client.post(
                url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, headers=auth("sk-opp")
            )
        async with gateway(contract(), settings(up.url, None)) as (_gw, url):
            refused = await client.post(url + "/v1/completions", json={"prompt": "x"}, headers=auth("sk-opp"))
    assert ok.status_code == 200 and up.headers[0]["authorization"] == "Bearer sk-engine-secret"
    assert refused.status_code == 502 and refused.json()["error"]["code"] == "upstream_auth"
    assert "sk-engine-secret" not in caplog.text
    assert "sk-engine-secret" not in repr(settings(up.url, None, upstream_api_key="sk-engine-secret"))
