"""The gateway's own cost, each process on its own: added latency, and throughput at C slots.

Run: ``python benchmarks/bench_gateway_path.py [--requests N] [--rounds R] [--json OUT]``
(`python -m benchmarks` runs it with small sizes).

The fake upstream (`rvguard.gateway.fake`) and the gateway (``rvguard serve``) each run in a
process of their own, as in production; the client (httpx) runs here, and every figure is on its
clock. Each round measures the direct path and the guarded path one after the other, and the
figures are the medians over rounds (the machine is shared: compare within one run).

1. Added latency: one non-streamed request at a time (16 tokens, no token delay); p50 and p99 of
   each path, and the gateway's addition (aim: p99 ≤ 1 ms, issue 30).
2. Throughput at C slots: a fake upstream that holds C sequences at once (``--max-num-seqs``),
   each taking a fixed service time (16 tokens × ``--token-delay``), behind a gateway with
   C = ``--slots`` slots; requests/s with C clients and with 2C clients (the extra ones queue at the
   gateway, or at the engine when direct); the ratio gateway / direct (aim: ≥ 0.95×, issue 30).
   A slot idles between a request's last token and the next dispatch: this ratio shows it.

``gateway_loop`` names the event loop ``rvguard serve`` runs here (uvloop where it imports).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rvguard.contract import Contract  # noqa: E402
from rvguard.gateway.calibrate import percentile  # noqa: E402
from rvguard.gateway.server import event_loop  # noqa: E402
from tests.gateway._support import contract, serve_process  # noqa: E402

BODY = {"model": "fake", "prompt": "x", "max_tokens": 16}
HEAD = {"authorization": "Bearer sk-opp"}
_FAKE = """
import asyncio, sys
from rvguard.gateway.fake import FakeUpstream
async def main():
    slots = int(sys.argv[1]) or None
    async with FakeUpstream(slots=slots, token_delay=float(sys.argv[2])) as up:
        print(up.url, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""


@contextlib.contextmanager
def fake_process(slots: int, token_delay: float) -> Iterator[str]:
    """A fake upstream in its own process; yields its URL, stops when stdin closes."""
    cmd = [sys.executable, "-c", _FAKE, str(slots), str(token_delay)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


async def _sequential(client: httpx.AsyncClient, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = await client.post(url + "/v1/completions", json=BODY, headers=HEAD)
        assert r.status_code == 200, r.text
        out.append(time.perf_counter() - t)
    return out


async def _load(url: str, n: int, clients: int) -> float:
    """Requests/s of ``n`` requests sent by ``clients`` closed-loop clients."""
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:
        left = iter(range(n))

        async def worker() -> None:
            for _ in left:
                r = await client.post(url + "/v1/completions", json=BODY, headers=HEAD)
                assert r.status_code == 200, r.text

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return n / (time.perf_counter() - t)


async def added_latency(direct: str, guarded: str, n: int, rounds: int) -> dict[str, Any]:
    """Medians over rounds of each path's p50/p99 (ms) and the gateway's addition."""
    rows: dict[str, list[float]] = {}
    async with httpx.AsyncClient(timeout=30.0) as client:
        await _sequential(client, direct, 20)
        await _sequential(client, guarded, 20)  # warm both paths
        for _ in range(rounds):
            d = await _sequential(client, direct, n)
            g = await _sequential(client, guarded, n)
            for q in (50, 99):
                dq, gq = 1e3 * percentile(d, q), 1e3 * percentile(g, q)
                rows.setdefault(f"direct_p{q}_ms", []).append(dq)
                rows.setdefault(f"gateway_p{q}_ms", []).append(gq)
                rows.setdefault(f"added_p{q}_ms", []).append(gq - dq)
    return {"n": n, "rounds": rounds, **{k: round(statistics.median(v), 3) for k, v in rows.items()}}


async def throughput(direct: str, guarded: str, n: int, rounds: int, slots: int) -> dict[str, Any]:
    """Medians over rounds of requests/s direct and through the gateway, with C and 2C clients."""
    out: dict[str, Any] = {"n": n, "rounds": rounds, "slots": slots}
    for clients in (slots, 2 * slots):
        await _load(direct, 2 * clients, clients)
        await _load(guarded, 2 * clients, clients)  # warm both paths
        d_rates, g_rates, ratios = [], [], []
        for _ in range(rounds):
            d = await _load(direct, n, clients)
            g = await _load(guarded, n, clients)
            d_rates.append(d)
            g_rates.append(g)
            ratios.append(g / d)
        out[f"clients_{clients}"] = {
            "direct_req_s": round(statistics.median(d_rates), 2),
            "gateway_req_s": round(statistics.median(g_rates), 2),
            "ratio": round(statistics.median(ratios), 3),
        }
    return out


def _contract(slots: int) -> Contract:
    """The tests' gateway contract with C = ``slots``, and an s_max no run here breaks (a loaded
    machine would otherwise fill the terminal with the watch's service alerts)."""
    service = {"s_max": 30.0, "s_max_opp": 30.0, "lower": 0.001, "upper": None}
    return contract(slots=slots, service=service)


async def main(argv: list[str]) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=200, help="requests per path per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slots", type=int, default=4, help="C: the gateway's slots, the engine's seqs")
    ap.add_argument("--token-delay", type=float, default=0.005, help="s per token (16 per request)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "lat").mkdir()
        (tmp / "thr").mkdir()
        quiet = ("--log-level", "warning")  # no access line per request on the terminal
        with fake_process(0, 0.0) as up, serve_process(_contract(4), up, tmp / "lat", *quiet) as (url, _):
            out["added_latency"] = await added_latency(up, url, a.requests, a.rounds)
        c, delay = _contract(a.slots), a.token_delay
        with fake_process(a.slots, delay) as up, serve_process(c, up, tmp / "thr", *quiet) as (url, _):
            n = max(4 * a.slots, a.requests // 2)
            out["throughput"] = await throughput(up, url, n, a.rounds, a.slots)
    out["service_s"] = 16 * a.token_delay
    out["gateway_loop"] = event_loop()  # the gateway's process runs this interpreter, on this PYTHONPATH
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:])), indent=2))
