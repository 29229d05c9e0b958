"""The real engine's throughput alone against the same load through the gateway (issue 27 item 6).

    RVGUARD_VLLM_VENV=/path/.venv-vllm .venv/bin/python benchmarks/bench_engine_throughput.py \\
        --start-engine [--concurrency 4,8] [--seconds 30] [--rounds 3] [--tokens 128] [--json OUT]

The vLLM CPU engine (``--max-num-seqs 4``) runs pinned to CPU 1 (``scripts/pinned_engine.py``);
this process (the closed-loop clients and the gateway, in process) runs on CPU 0. For each
concurrency N, N clients each keep one request outstanding (128 tokens, ``ignore_eos``; the next
sent when the answer arrives) for ``--seconds``: straight to the engine (``engine``); straight to
the engine with every answer streamed (``engine-stream``), as the gateway asks the engine for each
request, so the engine's API server writes an event per token on the engine's own core; and
through the gateway with C = 4 slots (``gateway``: one unfloored tenant, the guard's slots and
order, no admission policy). The order of the paths is reversed every other round.

Counted: completions per second after the first quarter (warm-up); the engine's own mean count of
running sequences over the same span (its ``vllm:num_requests_running`` gauge, read every 0.25 s:
how full its batch was); on the gateway's clock, the wait from a completion that left requests
queued to the next dispatch; the machine's 1-minute load and the CPU of the run's own processes
and of all others (`rvguard.study.pinned`) over each measurement. Reported per concurrency: each
path's median, and the ratios round by round. Not in ``make bench``: it needs the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from pinned_engine import VENV, pin_self, pinned_engine  # noqa: E402

from rvguard.clock import MonotonicClock  # noqa: E402
from rvguard.contract import Contract, contract_from_mapping  # noqa: E402
from rvguard.enforce.dispatchers import fresh_connections  # noqa: E402
from rvguard.gateway.app import Gateway, GatewaySettings, serving  # noqa: E402
from rvguard.gateway.config import KeysConfig  # noqa: E402
from rvguard.io import read_events  # noqa: E402
from rvguard.study.pinned import cpu_sample, group_pids, machine_load  # noqa: E402

SLOTS = 4
PATHS = ("engine", "engine-stream", "gateway")  # the engine alone (plain, streamed), and the gateway
PROMPT = "Tell me about the admission floor."


def probe_contract(tokens: int) -> Contract:
    """C = 4 slots, one unfloored tenant, no deadline or envelope that could bind."""
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": SLOTS,
            "output_cap": tokens,
            "service": {"s_max": 600.0},
            "tenants": {"probe": {"floor": 0, "deadline": 600.0}},
        }
    )


async def closed_loop(
    url: str,
    engine: str,
    *,
    clients: int,
    seconds: float,
    tokens: int,
    stream: bool = False,
    model: str = "tiny",
) -> dict[str, Any]:
    """``clients`` closed-loop clients on ``url`` for ``seconds``: completions/s after the warm-up,
    and the engine's mean running sequences over the same span. ``stream``: each answer streamed
    (server-sent events, read to the end), as the gateway asks the engine for every request."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True, "stream": stream}
    head = {"authorization": "Bearer sk-probe"}
    clock = MonotonicClock()
    done: list[float] = []
    gauge: list[tuple[float, float]] = []
    stop = asyncio.Event()
    async with (
        httpx.AsyncClient(timeout=120.0, limits=fresh_connections()) as client,
        httpx.AsyncClient(timeout=10.0) as scraper,
    ):

        async def worker() -> None:
            while clock.now() < seconds:
                async with client.stream("POST", url + "/v1/completions", json=body, headers=head) as r:
                    text = await r.aread()
                if r.status_code != 200 or (stream and not text.rstrip().endswith(b"[DONE]")):
                    raise SystemExit(f"http {r.status_code}: {text[:200]!r}")
                done.append(clock.now())

        async def scrape() -> None:  # the engine's running-sequence gauge every 0.25 s
            while not stop.is_set():
                t = clock.now()
                text = (await scraper.get(engine + "/metrics")).text
                running = [x for x in text.splitlines() if x.startswith("vllm:num_requests_running")]
                gauge.append((t, sum(float(x.rsplit(" ", 1)[1]) for x in running)))
                await asyncio.sleep(0.25)

        scraping = asyncio.ensure_future(scrape())
        await asyncio.gather(*(worker() for _ in range(clients)))
        stop.set()
        await scraping
    warm = seconds / 4
    counted = [t for t in done if warm <= t <= seconds]
    running = [g for t, g in gauge if warm <= t <= seconds]
    return {
        "req_per_s": len(counted) / (seconds - warm),
        "engine_running_mean": statistics.fmean(running) if running else None,
    }


def slot_refill(trace: Path) -> dict[str, Any]:
    """On the gateway's own clock: from a completion that left requests queued to the next dispatch."""
    queued: set[str] = set()
    pending: list[float] = []
    gaps: list[float] = []
    for _, ev in read_events(trace):
        kind = ev.kind.value
        if kind == "admit":
            queued.add(ev.rid)
        elif kind == "dispatch":
            queued.discard(ev.rid)
            if pending:
                gaps.append(ev.t - pending.pop(0))
        elif kind == "complete" and queued:
            pending.append(ev.t)
    if not gaps:
        return {"refills": 0}
    gaps.sort()
    return {
        "refills": len(gaps),
        "refill_p50_ms": 1e3 * gaps[len(gaps) // 2],
        "refill_max_ms": 1e3 * gaps[-1],
    }


async def through_gateway(engine: str, tmp: Path, **kw: Any) -> dict[str, Any]:
    trace = tmp / "gateway.jsonl"
    trace.unlink(missing_ok=True)
    settings = GatewaySettings(
        upstream=engine, keys=KeysConfig(keys={"sk-probe": "probe"}), send_priority=False, trace=trace
    )
    gw = Gateway(probe_contract(kw["tokens"]), settings)
    async with serving(gw.app) as url:
        out = await closed_loop(url, engine, **kw)
    return {**out, **slot_refill(trace)}


async def measure(engine: str, own: Callable[[], list[int]], args: argparse.Namespace) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rvguard-thr-") as d:
        for rnd in range(args.rounds):
            for n in args.concurrency:
                order = args.paths if rnd % 2 == 0 else args.paths[::-1]
                for path in order:
                    kw = {"clients": n, "seconds": args.seconds, "tokens": args.tokens}
                    before = cpu_sample(own())
                    if path == "gateway":
                        got = await through_gateway(engine, Path(d), **kw)
                    else:
                        got = await closed_loop(engine, engine, stream=path == "engine-stream", **kw)
                    load = machine_load(before, cpu_sample(own()))  # type: ignore[operator]
                    row = {"round": rnd, "concurrency": n, "path": path, **got, **load}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    return {"rows": rows, "summary": summarise(rows)}


def _ratios(by: dict[str, dict[int, dict[str, Any]]], num: str, den: str) -> list[float]:
    """``num``'s throughput over ``den``'s, round by round (the same round's neighbours)."""
    return [by[num][k]["req_per_s"] / by[den][k]["req_per_s"] for k in by[den] if k in by[num]]


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per concurrency: each path's median throughput and engine batch, and the ratios per round."""
    out: dict[str, Any] = {}
    for n in sorted({r["concurrency"] for r in rows}):
        mine = [r for r in rows if r["concurrency"] == n]
        by = {p: {r["round"]: r for r in mine if r["path"] == p} for p in PATHS}
        cell: dict[str, Any] = {}
        for p in (p for p in PATHS if by[p]):
            cell[f"{p}_req_per_s"] = statistics.median(r["req_per_s"] for r in by[p].values())
            cell[f"{p}_running_mean"] = statistics.median(
                r["engine_running_mean"] or 0.0 for r in by[p].values()
            )
        for num, den in (("gateway", "engine"), ("gateway", "engine-stream"), ("engine-stream", "engine")):
            ratios = _ratios(by, num, den)
            if ratios:
                cell[f"{num}/{den}"] = {
                    "median": statistics.median(ratios),
                    "rounds": [round(x, 3) for x in ratios],
                }
        cell["loadavg_1m"] = [r["loadavg_1m_before"] for r in mine] + [mine[-1]["loadavg_1m_after"]]
        cell["foreign_cpu_max"] = max(r["foreign_cpu"] for r in mine)
        out[str(n)] = cell
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", help="a running engine's URL (else --start-engine)")
    p.add_argument("--engine-pgid", type=int, default=None, help="its process group (its CPU counts as own)")
    p.add_argument("--start-engine", action="store_true")
    p.add_argument("--venv", default=str(VENV))
    p.add_argument("--concurrency", default="4,8")
    p.add_argument("--paths", default=",".join(PATHS), help="of " + ", ".join(PATHS))
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    args.concurrency = [int(x) for x in args.concurrency.split(",")]
    args.paths = [x for x in args.paths.split(",") if x in PATHS]
    if (args.engine is None) == (not args.start_engine):
        p.error("give exactly one of --engine and --start-engine")
    pin_self(0)
    if args.start_engine:
        with pinned_engine(ROOT / "build" / "bench-engine-throughput.log", venv=Path(args.venv)) as eng:
            result = asyncio.run(measure(eng.url, lambda: [os.getpid(), *group_pids(eng.pgid)], args))
    else:
        pgid = args.engine_pgid
        result = asyncio.run(
            measure(args.engine, lambda: [os.getpid(), *(group_pids(pgid) if pgid else [])], args)
        )
    result["args"] = dict(vars(args))
    print(json.dumps(result["summary"], indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
