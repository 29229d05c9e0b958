"""Gateway benchmark: added latency, throughput, and one end-to-end run on vLLM CPU.

    .venv/bin/python benchmarks/bench_gateway.py [--requests N] [--vllm URL] [--json OUT]

1. Added latency: the same non-streamed request (16 tokens, no token delay)
   sent one at a time to the fake upstream directly and through the gateway;
   p50/p99 of each and the difference.
2. Throughput: requests/s through the gateway with the fast in-process fake
   upstream, 32 concurrent clients.
3. With ``--vllm URL`` (a running vLLM server, model ``tiny``): the e2e test's
   load (azure_conv slice, 40 req/s, 200 requests, 30 % assured, learner
   rejecting every assured request) through the gateway and straight to the
   engine; the miss fraction (latency > D) of the floor-entitled requests,
   client-side, and in the gateway's own trace.

Everything runs on 127.0.0.1; client, gateway and fake share one event loop
(so the figures include the client's own cost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # for tests/; an rvguard on PYTHONPATH (a compiled build) or installed wins

from _checkout import use_checkout_tests  # noqa: E402

use_checkout_tests()  # the checkout's tests/, not the one ciw installs

from rvguard.clock import MonotonicClock  # noqa: E402
from rvguard.contract import Entitlement  # noqa: E402
from rvguard.data import TRACES  # noqa: E402
from rvguard.gateway.calibrate import percentile  # noqa: E402
from rvguard.gateway.fake import FakeUpstream  # noqa: E402
from rvguard.gateway.loadgen import replay, shots_from_trace  # noqa: E402
from rvguard.io.public import FractionRule  # noqa: E402
from tests.gateway._support import RejectAssured, contract, gateway, read_trace, settings  # noqa: E402

BODY = {"model": "fake", "prompt": "x", "max_tokens": 16}
HEAD = {"authorization": "Bearer sk-opp"}


async def _sequential(client: httpx.AsyncClient, url: str, n: int) -> list[float]:
    clock = MonotonicClock()
    out = []
    for _ in range(n):
        t = clock.now()
        r = await client.post(url + "/v1/completions", json=BODY, headers=HEAD)
        assert r.status_code == 200, r.text
        out.append(clock.now() - t)
    return out


async def added_latency(n: int, tmp: Path) -> dict[str, Any]:
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp / "lat.jsonl")) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        await _sequential(client, up.url, 20)
        await _sequential(client, url, 20)  # warm both paths
        direct = await _sequential(client, up.url, n)
        guarded = await _sequential(client, url, n)
    res = {}
    for name, xs in (("direct", direct), ("gateway", guarded)):
        res[name] = {"p50_ms": 1e3 * percentile(xs, 50), "p99_ms": 1e3 * percentile(xs, 99)}
    res["added_p50_ms"] = res["gateway"]["p50_ms"] - res["direct"]["p50_ms"]
    res["added_p99_ms"] = res["gateway"]["p99_ms"] - res["direct"]["p99_ms"]
    res["n"] = n
    return res


async def throughput(n: int, tmp: Path, concurrency: int = 32) -> dict[str, Any]:
    async with FakeUpstream() as up, gateway(contract(), settings(up.url, tmp / "thr.jsonl")) as (_gw, url):
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:
            left = iter(range(n))

            async def worker() -> None:
                for _ in left:
                    r = await client.post(url + "/v1/completions", json=BODY, headers=HEAD)
                    assert r.status_code == 200

            clock = MonotonicClock()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            secs = clock.now()
    return {"requests": n, "concurrency": concurrency, "seconds": secs, "req_per_s": n / secs}


async def e2e(vllm: str, tmp: Path) -> dict[str, Any]:
    c = contract(output_cap=96)
    deadline = c.tenants["assured"].deadline
    shots = shots_from_trace(
        TRACES / "azure_conv_slice.csv",
        rate=40.0,
        limit=200,
        tenant_rule=FractionRule(0.3, seed=7),
        output_cap=96,
        min_tokens=8,
        stream_every=5,
    )
    keys = {"assured": "sk-assured", "opportunistic": "sk-opp"}
    trace = tmp / "e2e.jsonl"
    async with gateway(c, settings(vllm, trace, learner=RejectAssured(c), read_timeout=60.0)) as (_gw, url):
        guarded = await replay(url, shots, model="tiny", keys=keys, timeout=120.0)
    direct = await replay(vllm, shots, model="tiny", timeout=120.0)
    events = read_trace(trace)
    ent = Entitlement(c)
    entitled = [e["rid"] for e in events if e["kind"] == "arrive" and ent.arrive(e["tenant"], e["t"])[1]]
    by_rid = {r.rid: i for i, r in enumerate(guarded)}
    done = {e["rid"]: e["t"] for e in events if e["kind"] == "complete"}
    due = {e["rid"]: e["deadline"] for e in events if e["kind"] == "arrive"}

    def miss(rs: list[Any]) -> float:
        return sum(r.status != 200 or r.latency > deadline for r in rs) / len(rs)

    assured_direct = [r for r in direct if r.shot.tenant == "assured"]
    return {
        "requests": len(shots),
        "entitled": len(entitled),
        "guarded_entitled_miss_client": miss([guarded[by_rid[r]] for r in entitled]),
        "guarded_entitled_miss_trace": sum(done.get(r, 1e18) > due[r] for r in entitled) / len(entitled),
        "direct_entitled_miss": miss([direct[by_rid[r]] for r in entitled]),
        "direct_all_assured_miss": miss(assured_direct),
        "guarded_status_counts": {
            str(s): sum(r.status == s for r in guarded) for s in {r.status for r in guarded}
        },
        "direct_p50_latency_s": statistics.median(r.latency for r in direct),
    }


async def main(argv: list[str]) -> dict[str, Any]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--vllm")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = {
            "added_latency": await added_latency(a.requests, tmp),
            "throughput": await throughput(4 * a.requests, tmp),
        }
        if a.vllm:
            out["e2e_vllm"] = await e2e(a.vllm, tmp)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:])), indent=2))
