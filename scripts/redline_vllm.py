"""The redline end to end on the vLLM CPU engine with a small KV cache: guard alone vs guard + redline.

Start an engine whose KV cache holds fewer tokens than its C sequences can ask for (so vLLM
queues and preempts on its own), e.g. the tiny Llama with ``--num-gpu-blocks-override 12
--block-size 32 --max-model-len 256 --max-num-seqs 4`` (384 tokens for 4 × 250), then:

    python scripts/redline_vllm.py --engine http://127.0.0.1:PORT --seconds 40 --out results/redline-vllm

Two arms through the in-process gateway, on the same load: assured requests (16 tokens) paced
below their floor, opportunistic requests (250 tokens, ``ignore_eos``) kept ``--surplus`` deep in a
closed loop. ``guard``: the guard alone; ``redline``: the guard with the redline on the engine's
``/metrics`` (demotion of queued surplus while the KV headroom is below ``h_min``, preemption of
running surplus past the hard floor); ``reserve``: one of the C slots reserved from surplus
(R = 1); ``reserve+redline``: both. Each arm's trace is checked (`rvguard check`) and
reviewed; printed: assured miss (completed after the deadline or not completed, of the
assured sent), surplus completed, the engine's own preemptions (``vllm:num_preemptions_total``),
demotions and preemptions by the guard.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

from rvguard.check import check_trace
from rvguard.contract import contract_from_mapping
from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.gateway.app import Gateway, GatewaySettings, serving
from rvguard.gateway.config import KeysConfig

KEYS = {"sk-assured": "assured", "sk-opp": "opportunistic"}
#: the guard alone, with the redline, with a reserved slot (R = 1), with both
ARMS = ("guard", "redline", "reserve", "reserve+redline")
DEADLINE = 0.6


def contract(deadline: float) -> Any:
    """C = 4, W = 1 s; assured floor 3 at ``deadline``, 16 tokens; opportunistic up to 250 tokens."""
    return _CONTRACT.model_copy(
        update={
            "tenants": {
                **_CONTRACT.tenants,
                "assured": _CONTRACT.tenants["assured"].model_copy(update={"deadline": deadline}),
            }
        }
    )


_CONTRACT = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 4,
        "output_cap": 250,
        "service": {"s_max": 0.5, "s_max_opp": 2.0, "lower": 0.0},
        "tenants": {
            "assured": {"floor": 3, "deadline": DEADLINE, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
        },
    }
)
REDLINE = RedlineConfig(
    (ResourceLimit("kv_cache", h_min=0.35, margin=0.15, hard_floor=0.1),), alpha=0.5, dwell=2
)


def _preemptions(text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_preemptions_total")
    )


async def _assured(
    client: httpx.AsyncClient, url: str, seconds: float, rate: float, out: list[float | None]
) -> None:
    async def one() -> None:
        t0 = time.perf_counter()
        body = {"model": "tiny", "prompt": "assured", "max_tokens": 16, "ignore_eos": True}
        r = await client.post(
            url + "/v1/completions", json=body, headers={"authorization": "Bearer sk-assured"}
        )
        out.append(time.perf_counter() - t0 if r.status_code == 200 else None)

    tasks, start = [], time.perf_counter()
    for i in range(int(seconds * rate)):
        await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)


async def _surplus(client: httpx.AsyncClient, url: str, stop: asyncio.Event, done: list[int]) -> None:
    body = {"model": "tiny", "prompt": "long answer", "max_tokens": 250, "ignore_eos": True}
    while not stop.is_set():
        r = await client.post(url + "/v1/completions", json=body, headers={"authorization": "Bearer sk-opp"})
        done[r.status_code == 200] += 1
        if r.status_code != 200:
            await asyncio.sleep(float(r.headers.get("retry-after", "0.2")))


async def arm(
    name: str, engine: str, seconds: float, surplus: int, rate: float, out: Path, deadline: float
) -> dict[str, Any]:
    trace = out / f"{name}.jsonl"
    trace.unlink(missing_ok=True)
    extra: dict[str, Any] = {}
    base = contract(deadline)
    contract_ = base.model_copy(update={"reserve": 1}) if "reserve" in name else base
    if "redline" in name:
        extra = {"redline": REDLINE, "headroom_url": engine + "/metrics", "headroom_interval": 0.05}
    settings = GatewaySettings(
        upstream=engine, keys=KeysConfig(keys=KEYS), trace=trace, timeout=60.0, preempt_grace=0.0, **extra
    )
    gw = Gateway(contract_, settings)
    latencies: list[float | None] = []
    ends = [0, 0]  # [failed or refused, completed]
    async with httpx.AsyncClient(timeout=120.0) as client:
        before = _preemptions((await client.get(engine + "/metrics")).text)
        async with serving(gw.app) as url:
            stop = asyncio.Event()
            loops = [asyncio.ensure_future(_surplus(client, url, stop, ends)) for _ in range(surplus)]
            await _assured(client, url, seconds, rate, latencies)
            stop.set()
            await asyncio.gather(*loops)
        after = _preemptions((await client.get(engine + "/metrics")).text)
    missed = sum(1 for x in latencies if x is None or x > deadline)
    report = check_trace(str(trace), contract_, properties=("AF", "SF", "DR", "WF"))
    kinds: dict[str, int] = {}
    for line in trace.read_text().splitlines():
        kind = json.loads(line)["kind"]
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "arm": name,
        "assured_sent": len(latencies),
        "assured_missed": missed,
        "assured_miss": missed / len(latencies),
        "assured_p95_s": sorted(x if x is not None else float("inf") for x in latencies)[
            int(0.95 * len(latencies))
        ],
        "surplus_completed": ends[1],
        "surplus_refused_or_preempted": ends[0],
        "engine_preemptions": after - before,
        "trace_events": kinds,
        "check_holds": report.holds,
        "violations": [v.to_dict() for v in report.violations][:5],
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--engine", required=True)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--surplus", type=int, default=6, help="opportunistic requests kept outstanding")
    p.add_argument("--rate", type=float, default=2.5, help="assured requests per second (floor 3/s)")
    p.add_argument("--out", default="results/redline-vllm")
    p.add_argument("--deadline", type=float, default=DEADLINE, help="the assured deadline D, s")
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms to run")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = [
        await arm(n, args.engine, args.seconds, args.surplus, args.rate, out, args.deadline)
        for n in args.arms.split(",")
    ]
    (out / "summary.json").write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    asyncio.run(main())
