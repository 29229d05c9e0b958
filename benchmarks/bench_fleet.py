"""Fleet benchmark: what the shared credit pool adds per arrival.

    .venv/bin/python benchmarks/bench_fleet.py [--arrivals N] [--json OUT]

1. Credit check latency, p50/p99, measured in one run on 127.0.0.1:
   * local — the single-replica check (`Entitlement.arrive` plus the floor
     room test the decision core makes): the baseline;
   * shared — `SharedCredits.spend` on a real redis-server (one Lua script
     per arrival, one round trip);
   * static — the same with the store away (the replica's own ledger).
   The added latency is shared − local.

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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rvguard.contract import Entitlement  # noqa: E402
from rvguard.fleet.credits import CreditsConfig, RedisStore, SharedCredits  # noqa: E402
from tests.fleet._pool import pool_contract  # noqa: E402
from tests.fleet.conftest import RedisServer  # noqa: E402


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


def main() -> int:
    """Run the fleet benchmarks and print (or write) their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrivals", type=int, default=5000, help="credit checks per path")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    figures = {"credit_check": credit_latency(args.arrivals)}
    c = figures["credit_check"]
    for name in ("local", "shared", "static"):
        print(f"credit check {name:7s} p50 {c[name]['p50_us']:8.1f} us  p99 {c[name]['p99_us']:8.1f} us")
    print(f"added by the shared pool: p50 {c['added_p50_us']:.1f} us, p99 {c['added_p99_us']:.1f} us")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
