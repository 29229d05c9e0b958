"""The redline end to end on the vLLM CPU engine with a small KV cache: guard alone vs guard + redline.

The engine's KV cache holds fewer tokens than its C sequences can ask for, so vLLM queues and
preempts on its own: the tiny Llama with ``--num-gpu-blocks-override 12 --block-size 32
--max-model-len 256 --max-num-seqs 4`` (384 tokens for 4 × 250). One command starts such an
engine (under the flock ``/tmp/rvguard-engine.lock``, killed at the end), runs the arms
interleaved and prints the paired comparison:

    python scripts/redline_vllm.py --start-engine --policy fcfs --arms guard,redline \\
        --pairs 6 --seconds 25 --deadline 1.5 --out results/redline-vllm-fcfs

(``--engine http://127.0.0.1:PORT`` instead of ``--start-engine`` uses a running engine.)

Arms, through the in-process gateway on the same load: assured requests (16 tokens) paced below
their floor, opportunistic requests (250 tokens, ``ignore_eos``) kept ``--surplus`` deep in a
closed loop. ``guard``: the guard alone; ``redline``: the guard with the contract's headroom
block on the engine's ``/metrics`` (queued surplus demoted while the KV headroom is below
``h_min``, running surplus preempted past the hard floor); ``reserve``: one of the C slots
reserved from surplus (R = 1); ``reserve+redline``: both.

``--policy fcfs`` starts the engine first-come-first-served and the gateway sends no vLLM
``priority`` (the engine does not know the tenants); ``--policy priority`` (as the test engine)
lets the gateway send each tenant's tier, so vLLM's own scheduler already preempts surplus first.
``--pairs N`` runs N rounds of all the arms in one engine session, the order reversed every other
round (ABBA…), so drift of the machine's load hits the arms alike.

Per arm run: assured miss (of the assured sent: completed after D or not completed, 429 refusals
as excess included), entitled miss (of those not refused as excess), surplus completed, the
engine's own preemptions (``vllm:num_preemptions_total``), the guard's demotions and preemptions,
and the trace checked for AF, DR, WF, RB, RL and PR. Summary: per arm the medians; per other arm
the per-round differences against the first arm, a two-sided sign test and a bootstrap 95%
interval of the mean difference (seeded).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from rvguard.check import check_trace
from rvguard.contract import Contract, Entitlement, contract_from_mapping
from rvguard.enforce.redline import redline_config
from rvguard.gateway.app import Gateway, GatewaySettings, serving
from rvguard.gateway.config import KeysConfig

KEYS = {"sk-assured": "assured", "sk-opp": "opportunistic"}
#: the guard alone, with the redline, with a reserved slot (R = 1), with both
ARMS = ("guard", "redline", "reserve", "reserve+redline")
DEADLINE = 0.6
PROPERTIES = ("AF", "DR", "WF", "RB", "RL", "PR")
ROOT = Path(__file__).resolve().parents[1]
LOCK = Path("/tmp/rvguard-engine.lock")
SMALL_KV = ("--num-gpu-blocks-override", "12", "--block-size", "32", "--max-model-len", "256")
#: the metrics each run reports, compared across arms
METRICS = (
    "assured_miss",
    "entitled_miss",
    "assured_median_s",
    "surplus_completed",
    "engine_preemptions",
    "demoted",
    "preempted_by_guard",
)


def contract(deadline: float) -> Contract:
    """C = 4, W = 1 s; assured floor 3 at ``deadline``, 16 tokens; opportunistic up to 250 tokens.

    The headroom block is the redline the redline arms run and RL's freshness bound (3 s: a busy
    engine's scrapes come about 1 s apart).
    """
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 4,
            "output_cap": 250,
            "service": {"s_max": 0.5, "s_max_opp": 2.0, "lower": 0.0},
            "tenants": {
                "assured": {"floor": 3, "deadline": deadline, "tier": 0},
                "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
            },
            "headroom": {
                "alpha": 0.5,
                "dwell": 2,
                "staleness": 3.0,
                "resources": {"kv_cache": {"h_min": 0.35, "margin": 0.15, "hard_floor": 0.1}},
            },
        }
    )


def _preemptions(text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_preemptions_total")
    )


async def _assured(
    client: httpx.AsyncClient, url: str, seconds: float, rate: float, out: list[tuple[int, float]]
) -> None:
    async def one() -> None:
        t0 = time.perf_counter()
        body = {"model": "tiny", "prompt": "assured", "max_tokens": 16, "ignore_eos": True}
        r = await client.post(
            url + "/v1/completions", json=body, headers={"authorization": "Bearer sk-assured"}
        )
        out.append((r.status_code, time.perf_counter() - t0))

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
    name: str,
    engine: str,
    seconds: float,
    surplus: int,
    rate: float,
    trace: Path,
    deadline: float,
    send_priority: bool,
) -> dict[str, Any]:
    """One arm run: the load through a fresh gateway, then its figures and its trace's check."""
    trace.unlink(missing_ok=True)
    extra: dict[str, Any] = {}
    base = contract(deadline)
    contract_ = base.model_copy(update={"reserve": 1}) if "reserve" in name else base
    if "redline" in name:
        assert base.headroom is not None
        extra = {
            "redline": redline_config(base.headroom),
            "headroom_url": engine + "/metrics",
            "headroom_interval": 0.05,
        }
    settings = GatewaySettings(
        upstream=engine,
        keys=KeysConfig(keys=KEYS),
        trace=trace,
        timeout=60.0,
        preempt_grace=0.0,
        send_priority=send_priority,
        **extra,
    )
    gw = Gateway(contract_, settings)
    answers: list[tuple[int, float]] = []
    ends = [0, 0]  # [failed or refused, completed]
    async with httpx.AsyncClient(timeout=120.0) as client:
        before = _preemptions((await client.get(engine + "/metrics")).text)
        async with serving(gw.app) as url:
            stop = asyncio.Event()
            loops = [asyncio.ensure_future(_surplus(client, url, stop, ends)) for _ in range(surplus)]
            await _assured(client, url, seconds, rate, answers)
            stop.set()
            await asyncio.gather(*loops)
        after = _preemptions((await client.get(engine + "/metrics")).text)
    missed = sum(1 for code, dt in answers if code != 200 or dt > deadline)
    excess = sum(1 for code, _ in answers if code == 429)
    report = check_trace(str(trace), contract_, properties=PROPERTIES)
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    kinds: dict[str, int] = {}
    for e in events:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    ent = Entitlement(contract_)  # entitlement re-derived from the trace's arrivals, not the guard's
    entitled = sum(
        1
        for e in events
        if e["kind"] == "arrive" and e["tenant"] == "assured" and ent.arrive(e["tenant"], e["t"])[1]
    )
    served = sorted(dt if code == 200 else math.inf for code, dt in answers if code != 429)
    return {
        "arm": name,
        "assured_sent": len(answers),
        "assured_missed": missed,
        "assured_miss": missed / len(answers),
        "refused_as_excess": excess,
        "entitled_by_trace": entitled,
        "entitled_miss": (missed - excess) / max(1, len(answers) - excess),
        "assured_median_s": statistics.median(served) if served else math.inf,
        "assured_p95_s": served[int(0.95 * len(served))] if served else math.inf,
        "surplus_completed": ends[1],
        "surplus_refused_or_preempted": ends[0],
        "engine_preemptions": after - before,
        "demoted": kinds.get("demote", 0),
        "preempted_by_guard": sum(
            1 for e in events if e["kind"] == "fail" and e.get("reason") == "preempted"
        ),
        "samples": kinds.get("sample", 0),
        "trace_events": kinds,
        "check_properties": list(PROPERTIES),
        "check_holds": report.holds,
        "violations": [v.to_dict() for v in report.violations][:5],
        "assured_answers": answers,  # (status, seconds) each, to judge another D afterwards
    }


def sign_test(diffs: list[float]) -> float:
    """Two-sided exact binomial p of the signs (ties left out); 1.0 with no untied pair."""
    pos, neg = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    n, k = pos + neg, min(pos, neg)
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * sum(math.comb(n, i) for i in range(k + 1)) / float(2**n))


def bootstrap(diffs: list[float], reps: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap 95% interval of the mean of ``diffs`` (seeded)."""
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(reps))
    return means[int(0.025 * reps)], means[int(0.975 * reps) - 1]


def summarise(runs: list[dict[str, Any]], arms: list[str]) -> dict[str, Any]:
    """Per-arm medians; per other arm its per-round differences against the first arm."""
    by = {a: [r for r in runs if r["arm"] == a] for a in arms}
    out: dict[str, Any] = {
        "medians": {a: {m: statistics.median(r[m] for r in rs) for m in METRICS} for a, rs in by.items()},
        "checks_hold": {a: [r["check_holds"] for r in rs] for a, rs in by.items()},
        "compared": {},
    }
    for a in arms[1:]:
        cmp: dict[str, Any] = {}
        for m in METRICS:
            diffs = [x[m] - y[m] for x, y in zip(by[a], by[arms[0]], strict=False)]
            lo, hi = bootstrap(diffs) if diffs else (math.nan, math.nan)
            cmp[m] = {"diffs": diffs, "sign_p": sign_test(diffs), "mean_ci95": [lo, hi]}
        out["compared"][f"{a} - {arms[0]}"] = cmp
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def engine(venv: Path, policy: str, log: Path) -> Iterator[str]:
    """A small-KV vLLM CPU engine on 127.0.0.1, under the engine flock, killed on exit."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    cmd = [
        str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(venv / "tiny-llama"), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", "4",
        "--scheduling-policy", policy, *SMALL_KV, "-O0", "--enforce-eager",
    ]  # fmt: skip
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one engine run at a time on this machine
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            deadline = time.monotonic() + 300.0
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"vLLM did not come up (exit {proc.poll()}); see {log}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/v1/models", timeout=2.0).status_code == 200:
                        break
                time.sleep(0.5)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


async def run(args: argparse.Namespace, url: str, out: Path) -> dict[str, Any]:
    arms = args.arms.split(",")
    runs: list[dict[str, Any]] = []
    for i in range(args.pairs):
        for name in arms if i % 2 == 0 else arms[::-1]:
            t0 = time.time()
            load = os.getloadavg()[0]
            trace = out / f"{name.replace('+', '_')}-{i}.jsonl"
            r = await arm(
                name,
                url,
                args.seconds,
                args.surplus,
                args.rate,
                trace,
                args.deadline,
                args.policy == "priority",
            )
            r.update(round=i, started=t0, loadavg_1m=load)
            runs.append(r)
            print(json.dumps({k: r[k] for k in ("round", "arm", "loadavg_1m", *METRICS, "check_holds")}))
    return {"args": vars(args), "runs": runs, "summary": summarise(runs, arms)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", help="a running engine's URL (else --start-engine)")
    p.add_argument("--start-engine", action="store_true", help="start a small-KV engine, kill it at the end")
    p.add_argument("--venv", default=os.environ.get("RVGUARD_VLLM_VENV", str(ROOT / ".venv-vllm")))
    p.add_argument(
        "--policy",
        choices=("fcfs", "priority"),
        default="priority",
        help="the engine's scheduling policy; fcfs: the gateway sends no vLLM priority",
    )
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--surplus", type=int, default=6, help="opportunistic requests kept outstanding")
    p.add_argument("--rate", type=float, default=2.5, help="assured requests per second (floor 3/s)")
    p.add_argument("--out", default="results/redline-vllm")
    p.add_argument("--deadline", type=float, default=DEADLINE, help="the assured deadline D, s")
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms; the first is the baseline")
    p.add_argument("--pairs", type=int, default=1, help="rounds of all the arms, order reversed every other")
    args = p.parse_args()
    if (args.engine is None) == (not args.start_engine):
        p.error("give exactly one of --engine and --start-engine")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.start_engine:
        with engine(Path(args.venv), args.policy, out / "engine.log") as url:
            result = asyncio.run(run(args, url, out))
    else:
        result = asyncio.run(run(args, args.engine, out))
    (out / "summary.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result["summary"], indent=2, default=str))


if __name__ == "__main__":
    main()
