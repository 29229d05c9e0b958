"""Shared pieces of the gateway tests: a contract, keys, a running gateway, trace helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import yaml

from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.identity import sign_claim
from rvguard.enforce.learners import LoadView
from rvguard.enforce.request import Request
from rvguard.events import Proposal
from rvguard.gateway.app import Gateway, GatewaySettings, serving
from rvguard.gateway.config import KeysConfig

KEYS = {"sk-assured": "assured", "sk-opp": "opportunistic"}
SECRET = b"0123456789abcdef-test-secret"
TERMINAL = {"reject", "complete", "drop", "fail"}


def contract(**over: Any) -> Contract:
    """C = 4 slots, W = 1 s, an assured floor of 2 per window, cap 96 tokens."""
    data: dict[str, Any] = {
        "epoch": 0.0,
        "window": 1.0,
        "slots": 4,
        "output_cap": 96,
        "excess": "reject",
        "credit": "count",
        "service": {"s_max": 0.4, "s_max_opp": 0.4, "lower": 0.001, "upper": None},
        "tenants": {
            "assured": {"floor": 2, "deadline": 1.5, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
        },
    }
    data.update(over)
    return contract_from_mapping(data)


def settings(upstream: str, trace: Path | None, **over: Any) -> GatewaySettings:
    base = GatewaySettings(upstream=upstream, keys=KeysConfig(keys=KEYS, claim_secret=SECRET), trace=trace)
    return replace(base, **over)


@contextlib.asynccontextmanager
async def gateway(c: Contract, s: GatewaySettings) -> AsyncIterator[tuple[Gateway, str]]:
    gw = Gateway(c, s)
    async with serving(gw.app, header_timeout=s.header_timeout) as url:
        yield gw, url


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The trace's event records: its segment header (on the first line) and the loop watchdog's
    ``stall`` records left out (a loaded test machine may add one anywhere; a test that looks for
    them reads the file itself)."""
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    recs = recs[1:] if recs and recs[0].get("kind") == "segment" else recs
    return [r for r in recs if r["kind"] != "stall"]


def terminal_counts(events: list[dict[str, Any]]) -> Counter[str]:
    """rid → number of terminal events (node records, ``sample`` and ``alert``, have no rid)."""
    c: Counter[str] = Counter()
    for ev in events:
        if "rid" in ev:
            c[ev["rid"]] += ev["kind"] in TERMINAL
    return c


def tenants(events: list[dict[str, Any]]) -> dict[str, str]:
    return {ev["rid"]: ev["tenant"] for ev in events if ev["kind"] == "arrive"}


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


class RejectAssured:
    """The adversarial learner: rejects every floored tenant's request, admits the rest (overload)."""

    def __init__(self, contract: Contract) -> None:
        self._floored = {n for n, t in contract.tenants.items() if t.floored}

    def propose(self, request: Request, view: LoadView) -> Proposal:
        return Proposal(admit=request.tenant not in self._floored)


def contract_data(c: Contract) -> dict[str, Any]:
    return c.model_dump(mode="json", exclude_none=True)


@contextlib.contextmanager
def serve_process(
    c: Contract,
    upstream: str,
    tmp: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    keys: dict[str, Any] | None = None,
    procs: list[subprocess.Popen[bytes]] | None = None,
    cwd: Path | None = None,
) -> Any:
    """``rvguard serve`` as a real process (its own event loop and CPU); yields (url, trace path).

    ``env`` is added to the process's environment (e.g. the upstream's API key); ``keys`` is the
    keys file's content (default: `KEYS` and the claim secret); the process is appended to ``procs``.
    It runs from the checkout's root (so that ``-m`` imports the checkout's ``rvguard``) or ``cwd``
    (the benchmarks: from ``benchmarks/``, the ``rvguard`` on ``PYTHONPATH`` or installed).

    Stopped with SIGINT (graceful: drains, closes the trace), then killed if it lingers.
    """
    root = Path(__file__).resolve().parents[2]
    spec, keys_file, trace = tmp / "contract.yaml", tmp / "keys.yaml", tmp / "serve.jsonl"
    spec.write_text(yaml.safe_dump(contract_data(c)))
    keys_file.write_text(yaml.safe_dump(keys or {"keys": KEYS, "claim_secret": SECRET.decode()}))
    with socket_port() as port:
        pass
    cmd = [
        sys.executable,
        "-m",
        "rvguard.cli",
        "serve",
        str(spec),
        "--upstream",
        upstream,
        "--port",
        str(port),
    ]
    cmd += ["--keys", str(keys_file), "--trace", str(trace), *extra]
    proc = subprocess.Popen(cmd, cwd=cwd or root, start_new_session=True, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    if procs is not None:
        procs.append(proc)
    try:
        for _ in range(300):  # ≤ 30 s
            try:
                if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, trace
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def socket_port() -> Any:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def max_queue(events: list[dict[str, Any]]) -> int:
    """The largest number of admitted, not yet dispatched (or dropped/failed) requests."""
    queued: set[str] = set()
    most = 0
    for ev in events:
        if ev["kind"] == "admit":
            queued.add(ev["rid"])
        elif ev["kind"] in ("dispatch", "drop", "fail"):
            queued.discard(ev["rid"])
        most = max(most, len(queued))
    return most


async def readyz_until(
    client: httpx.AsyncClient, url: str, status: int, within: float = 10.0
) -> httpx.Response:
    """``/readyz`` polled until it answers ``status`` or ``within`` seconds pass (the last answer).

    The probe runs on its own interval; on a loaded machine (CI, two xdist workers) one fixed
    sleep is not enough for it to have run, so tests wait for the change with a bound instead.
    """
    deadline = time.monotonic() + within
    while True:
        r = await client.get(url + "/readyz")
        if r.status_code == status or time.monotonic() > deadline:
            return r
        await asyncio.sleep(0.05)


async def stream_then_leave(client: httpx.AsyncClient, url: str, body: dict[str, Any], key: str) -> int:
    """POST a streaming completion, read three ``data:`` events, then close the connection."""
    seen = 0
    async with client.stream("POST", url + "/v1/completions", json=body, headers=auth(key)) as r:
        async for line in r.aiter_lines():
            seen += line.startswith("data:")
            if seen == 3:
                break
    return seen


def identity_attempts() -> tuple[list[dict[str, str]], str]:
    """Headers that must never bind a floored tenant, and one good claim for "assured".

    Unknown key, tampered / forged / expired claims, tenant-looking headers,
    a Basic scheme; send them with ``"user"``/``"tenant"`` body fields too.
    """
    good = sign_claim("assured", time.time() + 3600, SECRET)
    body_, _, sig = good.partition(".")
    forged = sign_claim("assured", time.time() + 3600, b"another-secret-of-16+")
    tampered = body_[:-2] + ("A" if body_[-2] != "A" else "B") + body_[-1] + "." + sig
    expired = sign_claim("assured", time.time() - 3600, SECRET)
    attempts: list[dict[str, str]] = [
        auth("sk-unknown"),
        {"x-rvguard-claim": tampered},
        {"x-rvguard-claim": forged},
        {"x-rvguard-claim": expired},
        {"x-tenant": "assured", "x-rvguard-tenant": "assured", "openai-organization": "assured"},
        {"authorization": "Basic sk-assured"},
    ]
    return attempts, good
