"""Fleet benchmark: what the shared credit pool adds per arrival.

    .venv/bin/python benchmarks/bench_fleet.py [--arrivals N] [--json OUT]

1. Credit check latency, p50/p99, measured in one run on 127.0.0.1:
   * local — the single-replica check (`Entitlement.arrive` plus the floor
     room test the decision core makes): the baseline;
   * shared — `SharedCredits.spend` on a real redis-server (one Lua script
     per arrival, one round trip);
   * static — the same with the store away (the replica's own ledger).
   The added latency is shared − local.
2. Replicas × requests/s: 1, 2 and 4 ``rvguard serve`` processes (each its own
   interpreter), every one routing over the same two fake engines (one
   separate process) and, but for the first row, spending one Redis pool
   (``--credits``); a client in this process sends assured completions (every
   one a floor-credit check) from 32 concurrent connections spread
   round-robin over the replicas. The machine's cores bound the scaling: the
   figures say what this machine did, with its core count beside them.

Starts its own redis-server (Debian's package; ``make redis``) on a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.append(str(ROOT))  # for tests/; an rvguard on PYTHONPATH (a compiled build) or installed wins

from _checkout import use_checkout_tests  # noqa: E402

use_checkout_tests()  # the checkout's tests/, not the one ciw installs

from rvguard.contract import Entitlement  # noqa: E402
from rvguard.fleet.credits import CreditsConfig, RedisStore, SharedCredits  # noqa: E402
from tests.fleet._pool import pool_contract  # noqa: E402
from tests.fleet.conftest import RedisServer  # noqa: E402
from tests.gateway._support import contract, serve_process  # noqa: E402


def _quantiles(xs: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(xs, n=100, method="inclusive")
    return {"p50_us": 1e6 * statistics.median(xs), "p99_us": 1e6 * qs[98], "n": len(xs)}


def local_check(n: int) -> list[float]:
    """The in-process floor check one replica makes today."""
    contract = pool_contract(1_000_000, window=3600.0)
    ent = Entitlement(contract)
    out = []
    used = 0.0
    for i in range(n):
        t0 = time.perf_counter()
        _, entitled, _, u = ent.arrive("gold", float(i) * 1e-3, 1)  # one unit: count credits
        ok = entitled and used + 1.0 <= 1_000_000
        used = u if ok else used
        out.append(time.perf_counter() - t0)
    return out


async def pool_check(url: str, n: int, *, down: bool) -> list[float]:
    """``SharedCredits.spend`` per arrival, store up (one script) or away (the ledger)."""
    contract = pool_contract(1_000_000, window=3600.0)
    cfg = CreditsConfig(url=url, replica="a", shares={"a": 0.5, "b": 0.5}, timeout=1.0, prefix="bench")
    pool = SharedCredits(contract, cfg, RedisStore(url, timeout=1.0), now=0.0)
    await pool.heartbeat(0.0)  # a fresh prefix fences windows 0 and 1
    if down:
        pool._up = False  # as after a failed call: no further round trips
    out = []
    now = 7200.0
    for _ in range(50):  # warm the connection and the script cache
        await pool.spend("gold", 1.0, now)
    for _ in range(n):
        t0 = time.perf_counter()
        d = await pool.spend("gold", 1.0, now)
        out.append(time.perf_counter() - t0)
        assert d.mode == ("static" if down else "shared")
    await pool.aclose()
    return out


def credit_latency(n: int) -> dict[str, Any]:
    """Local vs shared vs static credit check, p50/p99 in microseconds."""
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            local = local_check(n)
            shared = asyncio.run(pool_check(server.url, n, down=False))
            static = asyncio.run(pool_check(server.url, n, down=True))
        finally:
            server.kill()
    res = {"local": _quantiles(local), "shared": _quantiles(shared), "static": _quantiles(static)}
    res["added_p50_us"] = res["shared"]["p50_us"] - res["local"]["p50_us"]
    res["added_p99_us"] = res["shared"]["p99_us"] - res["local"]["p99_us"]
    return res


_ENGINES = """
import asyncio, sys
from rvguard.gateway.fake import FakeUpstream
async def main():
    ups = [FakeUpstream() for _ in range(2)]
    for u in ups:
        await u.start()
    print(" ".join(u.url for u in ups), flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""
_BODY = {"model": "fake", "prompt": "x", "max_tokens": 4}


async def _load(urls: list[str], n: int, concurrency: int = 32) -> tuple[float, int]:
    """``n`` assured completions over ``urls`` round-robin; (seconds, answers 200)."""
    import httpx

    todo = iter(range(n))
    ok = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal ok
        for i in todo:
            r = await client.post(
                urls[i % len(urls)] + "/v1/completions",
                json=_BODY,
                headers={"authorization": "Bearer sk-assured"},
            )
            ok += r.status_code == 200

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        for i in range(min(n, 50)):  # warm every replica's connections
            await client.get(urls[i % len(urls)] + "/healthz")
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return time.perf_counter() - t0, ok


def replica_scaling(n: int, replicas: tuple[int, ...] = (1, 2, 4)) -> list[dict[str, Any]]:
    """Requests/s through 1..4 gateway replicas (a shared Redis pool but for the local row)."""
    import contextlib
    import os
    import subprocess

    tenants = {
        "assured": {"floor": 1_000_000, "deadline": 60.0, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    }
    c = contract(slots=16, tenants=tenants)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        path = [*filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)), str(ROOT)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}  # the measured rvguard first
        fakes = subprocess.Popen([sys.executable, "-c", _ENGINES], stdout=subprocess.PIPE, env=env, text=True)
        try:
            assert fakes.stdout is not None
            e0, e1 = fakes.stdout.readline().split()
            for count, pooled in [(1, False), *[(r, True) for r in replicas]]:
                with contextlib.ExitStack() as stack:
                    urls = []
                    for i in range(count):
                        d = Path(tmp) / f"r{count}{pooled}{i}"
                        d.mkdir()
                        extra = ["--upstream", e1, "--log-level", "warning"]
                        if pooled:
                            extra += [
                                "--credits",
                                server.url,
                                "--replica",
                                f"r{i}",
                                "--share",
                                str(1 / count),
                            ]
                            extra += ["--credit-timeout", "0.5"]
                        url, _ = stack.enter_context(serve_process(c, e0, d, *extra, cwd=HERE))
                        urls.append(url)
                    time.sleep(2.5 * c.window)  # past the windows a fresh pool fences and the start window
                    seconds, ok = asyncio.run(_load(urls, n))
                rows.append(
                    {
                        "replicas": count,
                        "shared_pool": pooled,
                        "requests": n,
                        "ok": ok,
                        "req_per_s": ok / seconds,
                    }
                )
        finally:
            fakes.kill()
            fakes.wait()
            server.kill()
    return rows


def main() -> int:
    """Run the fleet benchmarks and print (or write) their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrivals", type=int, default=5000, help="credit checks per path")
    parser.add_argument("--requests", type=int, default=1200, help="requests per replica-count row")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    figures: dict[str, Any] = {"credit_check": credit_latency(args.arrivals)}
    c = figures["credit_check"]
    for name in ("local", "shared", "static"):
        print(f"credit check {name:7s} p50 {c[name]['p50_us']:8.1f} us  p99 {c[name]['p99_us']:8.1f} us")
    print(f"added by the shared pool: p50 {c['added_p50_us']:.1f} us, p99 {c['added_p99_us']:.1f} us")
    import os

    figures["replicas"] = replica_scaling(args.requests)
    figures["cores"] = os.cpu_count()
    for row in figures["replicas"]:
        pool = "shared pool" if row["shared_pool"] else "local credit"
        done = f"{row['ok']}/{row['requests']} ok"
        print(f"{row['replicas']} replica(s), {pool:12s}: {row['req_per_s']:7.1f} req/s ({done})")
    print(f"({figures['cores']} cores on this machine)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
