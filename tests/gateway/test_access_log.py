"""Logs an operator can use: one access line per request, probes at DEBUG, no HTTP client chatter."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest

from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.logs import JsonFormatter, configure

from ._support import auth, contract, gateway, settings


def _access(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", "") == "access"]


async def test_one_access_line_per_request_with_ids_tenant_status_latency_and_outcome(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a successful request left no log line at all."""
    caplog.set_level(logging.DEBUG, logger="rvguard.gateway")
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        body = {"prompt": "x", "max_tokens": 2}
        ok = await client.post(
            url + "/v1/completions", json=body, headers={**auth("sk-assured"), "x-request-id": "req-ok"}
        )
        nobody = await client.post(url + "/v1/completions", json=body)
        bad = await client.post(url + "/v1/completions", json={"prompt": ["a", "b"]}, headers=auth("sk-opp"))
        for probe in ("/healthz", "/readyz"):
            await client.get(url + probe)
    assert (ok.status_code, nobody.status_code, bad.status_code) == (200, 401, 400)
    lines = _access(caplog)
    by_path = [(r.path, r.status, r.levelno) for r in lines]  # type: ignore[attr-defined]
    assert by_path == [
        ("/v1/completions", 200, logging.INFO),
        ("/v1/completions", 401, logging.INFO),
        ("/v1/completions", 400, logging.INFO),
        ("/healthz", 200, logging.DEBUG),
        ("/readyz", 200, logging.DEBUG),
    ]
    first, second, third = (vars(r) for r in lines[:3])
    assert first["request_id"] == "req-ok" and first["tenant"] == "assured" and first["rid"] == "g0"
    assert first["outcome"] == "completed" and first["latency_ms"] > 0
    assert second["outcome"] == "refused" and second["reason"] == "unauthenticated" and second["tenant"] == ""
    assert third["outcome"] == "refused" and third["tenant"] == "opportunistic" and third["reason"]
    assert all(r["request_id"] for r in (first, second, third))
    as_json = json.loads(JsonFormatter().format(lines[0]))
    assert {"request_id", "tenant", "status", "latency_ms", "outcome", "reason"} <= set(as_json)


async def test_a_rejection_names_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rvguard.gateway")
    from rvguard.enforce.learners import RejectAll

    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, None, learner=RejectAll())) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        r = await client.post(url + "/v1/completions", json={"prompt": "x"}, headers=auth("sk-opp"))
    assert r.status_code == 429
    [line] = _access(caplog)
    assert vars(line)["outcome"] == "rejected" and vars(line)["reason"]


async def test_http_client_chatter_stays_below_warning() -> None:
    """Before: httpx logged every upstream call and every probe at INFO (56 of 90 lines in a short run)."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    try:
        configure("json", "info")
        root.addHandler(Keep())
        async with FakeUpstream() as up, httpx.AsyncClient() as client:
            await client.get(up.url + "/v1/models")
        assert [r for r in seen if r.name.startswith(("httpx", "httpcore"))] == []
        configure("text", "debug")
        assert logging.getLogger("httpx").getEffectiveLevel() == logging.DEBUG
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
        for name in ("httpx", "httpcore", "httpx_sse"):
            logging.getLogger(name).setLevel(logging.NOTSET)
