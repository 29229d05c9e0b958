"""The redline end to end on the vLLM CPU engine with a small KV cache: guard alone vs guard + redline.

The engine's KV cache holds fewer tokens than its C sequences can ask for, so vLLM queues and
preempts on its own: the tiny Llama with ``--num-gpu-blocks-override 12 --block-size 32
--max-model-len 256 --max-num-seqs 4`` (384 tokens for 4 × 250). One command starts such an
engine (under the flock ``/tmp/rvguard-engine.lock``, killed at the end), runs the arms
interleaved and prints the paired comparison:

    python scripts/redline_vllm.py --start-engine --policy fcfs --arms guard,redline \\
        --pairs 6 --seconds 25 --deadline 1.5 --out results/redline-vllm-fcfs

(``--engine http://127.0.0.1:PORT`` instead of ``--start-engine`` uses a running engine.)

With that default load (one-word assured prompts, 250-token surplus) the redline did not make the
assured miss less on this 2-core machine: their time in the engine did not shrink when surplus was
held back, which we read as the engine's steps and the gateway sharing the CPUs rather than a want
of KV (README, "Node headroom"). The KV-bound experiment separates the two: the engine pinned to CPU 1
and this script (gateway, clients, scrapes) to CPU 0 (``--pin``); two of the four slots reserved
from surplus in every arm (``--reserve 2``: the assured never wait in the guard for a slot); assured
prompts of 150 random token ids (``--assured-prompt 150``: 6 of the 12 blocks each, no shared
prefix), surplus of 180 tokens (``--surplus-tokens 180``: two of them fill the 12 blocks); the
redline's limits set to one assured request's KV (h_min 0.5, hard floor 0.45); assured streamed
(``--stream``) to tell a wait before the first token (queued for KV) from a stall between two
tokens (the sequence preempted by the engine and recomputed):

    python scripts/redline_vllm.py --start-engine --policy fcfs --pin --stream \\
        --arms guard,redline,evict,demote,alone --pairs 6 --seconds 20 --deadline 0.5 \\
        --reserve 2 --surplus 3 --assured-prompt 150 --surplus-tokens 180 \\
        --h-min 0.5 --margin 0.1 --hard-floor 0.45 --alpha 0.9 --dwell 1 \\
        --out results/redline-vllm-kv

(README, "Node headroom", has what these runs measured, also at D = 0.25 s, with the hard floor
swept and on the priority-policy engine; per-run figures in ``docs/engine/redline/``.)

Arms, through the in-process gateway on the same load: assured requests (16 tokens) paced below
their floor, opportunistic requests (``--surplus-tokens``, 250 by default, ``ignore_eos``) kept
``--surplus`` deep in a closed loop. ``guard``: the guard alone; ``redline``: the guard with the
contract's headroom block on the engine's ``/metrics`` (queued surplus demoted while the KV headroom is below
``h_min``, running surplus preempted past the hard floor); ``reserve``: one of the C slots
reserved from surplus (R = 1); ``reserve+redline``: both; ``scrape``: the guard alone while the
script reads ``/metrics`` as often as the redline's source does (every 50 ms, one read at a time),
to tell the scrapes' own cost on the engine's API server from what the redline decides;
``alone``: the guard with no surplus at all (how late the assured are on this machine alone);
``alone+scrape``: no surplus, ``/metrics`` read as in ``scrape`` (what the scrapes alone cost);
``demote``: the redline without its hard floor (surplus demoted, never preempted: what demotion
alone does); ``evict``: the redline with the emergency eviction channel past the hard floor
(k = 1, the largest state first, target h_min + margin; EV checked too) instead of preempting
every running surplus request. ``--alpha``, ``--dwell``, ``--h-min``, ``--margin`` and
``--hard-floor`` set the headroom block; ``--reserve`` R every arm's reserve (the ``reserve``
arms R + 1); ``redline/F`` or ``evict/F``: that arm with the hard floor F; ``--kv-blocks`` and
``--block-size`` the engine's cache (the CPU backend needs blocks of a multiple of 32);
``--scrape`` the seconds between two ``/metrics`` reads.

``--policy fcfs`` starts the engine first-come-first-served and the gateway sends no vLLM
``priority`` (the engine does not know the tenants); ``--policy priority`` (as the test engine)
lets the gateway send each tenant's tier, so vLLM's own scheduler already preempts surplus first.
``--pairs N`` runs N rounds of all the arms in one engine session, the order reversed every other
round (ABBA…), so drift of the machine's load hits the arms alike.

Per arm run: assured miss (of the assured sent: completed after D or not completed, 429 refusals
as excess included), entitled miss (of those not refused as excess), surplus completed, the
engine's own preemptions (``vllm:num_preemptions_total``) and mean queue time
(``vllm:request_queue_time_seconds``, all requests), the guard's demotions and preemptions, the
samples traced, where the assured spent their time (the trace's arrive → dispatch and dispatch →
end; streamed: to the first token and after it) and, of the late ones, how many waited for their
first token and how many stalled between two, and the trace checked for AF, DR, WF, RB, RL and PR.
Summary: per arm the medians; per other arm the per-round differences against the first arm, a
two-sided sign test and a bootstrap 95% interval of the mean difference (seeded).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from pinned_engine import pinned_engine  # scripts/ (this script's folder) is first on sys.path

from rvguard.check import check_trace
from rvguard.contract import Contract, Entitlement, contract_from_mapping
from rvguard.enforce.eviction import eviction_config
from rvguard.enforce.redline import redline_config
from rvguard.gateway.app import Gateway, GatewaySettings, serving
from rvguard.gateway.config import KeysConfig
from rvguard.runbook_spec import EvictionSpec

KEYS = {"sk-assured": "assured", "sk-opp": "opportunistic"}
#: the guard alone, with the redline, with a reserved slot (R = 1), with both; ``scrape``: the guard
#: alone while the script reads ``/metrics`` as often as the redline does (the scrapes' own cost);
#: ``alone``: the guard with the assured load only (what the machine alone does to the assured)
#: ``demote``: the redline without its hard floor (demotion only, nothing preempted); ``evict``:
#: the redline with the emergency eviction channel past the hard floor (k = 1, largest state first)
ARMS = (
    "guard",
    "redline",
    "reserve",
    "reserve+redline",
    "scrape",
    "alone",
    "alone+scrape",
    "demote",
    "evict",
)
SCRAPE = 0.05  # seconds between two reads of the engine's /metrics (at least)
DEADLINE = 0.6
PROPERTIES = ("AF", "DR", "WF", "RB", "RL", "PR")
ROOT = Path(__file__).resolve().parents[1]
#: the metrics each run reports, compared across arms
METRICS = (
    "assured_miss",
    "entitled_miss",
    "assured_median_s",
    "assured_guard_queue_s",
    "assured_after_dispatch_s",
    "assured_ttft_s",
    "assured_after_first_token_s",
    "engine_queue_mean_s",
    "surplus_completed",
    "engine_preemptions",
    "demoted",
    "preempted_by_guard",
    "samples",
)


def contract(
    deadline: float,
    alpha: float = 0.5,
    dwell: int = 2,
    *,
    output_cap: int = 250,
    h_min: float = 0.35,
    margin: float = 0.15,
    hard_floor: float = 0.1,
    reserve: int = 0,
) -> Contract:
    """C = 4, W = 1 s; assured floor 3 at ``deadline``, 16 tokens; opportunistic up to ``output_cap``.

    The headroom block is the redline the redline arms run and RL's freshness bound (3 s: a busy
    engine's scrapes come about 1 s apart).
    """
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 4,
            "reserve": reserve,
            "output_cap": output_cap,
            "service": {"s_max": 0.5, "s_max_opp": 2.0, "lower": 0.0},
            "tenants": {
                "assured": {"floor": 3, "deadline": deadline, "tier": 0},
                "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
            },
            "headroom": {
                "alpha": alpha,
                "dwell": dwell,
                "staleness": 3.0,
                "resources": {"kv_cache": {"h_min": h_min, "margin": margin, "hard_floor": hard_floor}},
            },
        }
    )


def _prompt(tokens: int, rng: random.Random) -> str | list[int]:
    """``tokens`` random token ids (no two prompts share a cached prefix block), or one word if 0."""
    return [rng.randrange(3, 384) for _ in range(tokens)] if tokens else "assured"


async def _assured(
    client: httpx.AsyncClient,
    url: str,
    seconds: float,
    rate: float,
    out: list[tuple[int, float, float, float]],
    prompt_tokens: int = 0,
    seed: int = 0,
    stream: bool = False,
) -> None:
    """Assured requests paced at ``rate``; each answer's (status, seconds, seconds to its first
    streamed token, the longest gap between two streamed chunks: NaN both unless ``stream``)."""
    rng = random.Random(seed)
    headers = {"authorization": "Bearer sk-assured"}

    async def one() -> None:
        t0 = time.perf_counter()
        prompt = _prompt(prompt_tokens, rng)
        body = {"model": "tiny", "prompt": prompt, "max_tokens": 16, "ignore_eos": True}
        if not stream:
            r = await client.post(url + "/v1/completions", json=body, headers=headers)
            out.append((r.status_code, time.perf_counter() - t0, math.nan, math.nan))
            return
        first, ok, last, gap = math.nan, True, math.nan, 0.0
        async with client.stream(
            "POST", url + "/v1/completions", json={**body, "stream": True}, headers=headers
        ) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:") and '"text"' in line:
                    now = time.perf_counter() - t0
                    first = now if math.isnan(first) else first
                    gap = gap if math.isnan(last) else max(gap, now - last)
                    last = now
                ok = ok and '"error"' not in line
        out.append((r.status_code if ok else 503, time.perf_counter() - t0, first, gap))

    tasks, start = [], time.perf_counter()
    for i in range(int(seconds * rate)):
        await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)


async def _surplus(
    client: httpx.AsyncClient, url: str, stop: asyncio.Event, done: list[int], tokens: int = 250
) -> None:
    body = {"model": "tiny", "prompt": "long answer", "max_tokens": tokens, "ignore_eos": True}
    while not stop.is_set():
        r = await client.post(url + "/v1/completions", json=body, headers={"authorization": "Bearer sk-opp"})
        done[r.status_code == 200] += 1
        if r.status_code != 200:
            await asyncio.sleep(float(r.headers.get("retry-after", "0.2")))


async def _scrape(client: httpx.AsyncClient, engine: str, stop: asyncio.Event) -> None:
    """Read the engine's /metrics as the redline's source does: one at a time, SCRAPE apart."""
    while not stop.is_set():
        await client.get(engine + "/metrics")
        await asyncio.sleep(SCRAPE)


def _engine_counters(text: str) -> dict[str, float]:
    """The engine's cumulative counters an arm reads before and after: preemptions, queue time."""
    out = {"preemptions": 0.0, "queue_s_sum": 0.0, "queue_n": 0.0}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name == "vllm:num_preemptions_total":
            out["preemptions"] += float(line.rsplit(" ", 1)[1])
        elif name == "vllm:request_queue_time_seconds_sum":
            out["queue_s_sum"] += float(line.rsplit(" ", 1)[1])
        elif name == "vllm:request_queue_time_seconds_count":
            out["queue_n"] += float(line.rsplit(" ", 1)[1])
    return out


def _assured_split(events: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Each completed assured request's time in the guard (arrive → dispatch) and after (→ end)."""
    arrive: dict[str, float] = {}
    dispatch: dict[str, float] = {}
    queue, engine_ = [], []
    for e in events:
        if e["kind"] == "arrive" and e["tenant"] == "assured":
            arrive[e["rid"]] = e["t"]
        elif e["kind"] == "dispatch" and e["rid"] in arrive:
            dispatch[e["rid"]] = e["t"]
        elif e["kind"] == "complete" and e["rid"] in dispatch:
            queue.append(dispatch[e["rid"]] - arrive[e["rid"]])
            engine_.append(e["t"] - dispatch[e["rid"]])
    return queue, engine_


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def _arm_setup(
    name: str, engine: str, base: Contract, args: argparse.Namespace
) -> tuple[Contract, dict[str, Any], tuple[str, ...]]:
    """An arm's contract, its gateway settings beyond the common ones, the properties checked."""
    extra: dict[str, Any] = {}
    name, _, floor = name.partition("/")  # "redline/0.3": that arm's hard floor
    contract_ = base.model_copy(update={"reserve": base.reserve + 1}) if "reserve" in name else base
    properties = PROPERTIES
    if name == "evict":
        capacity = args.kv_blocks * args.block_size
        spec_ = EvictionSpec(k=1, capacity=capacity, target=min(1.0, args.h_min + args.margin))
        contract_ = contract_.model_copy(update={"eviction": spec_})
        extra["eviction"] = eviction_config(spec_)
        properties = (*PROPERTIES, "EV")
    if "redline" in name or name in ("demote", "evict"):
        assert base.headroom is not None
        spec = base.headroom
        if name == "demote" or floor:
            hard_floor = float(floor or 0.0)
            kv = spec.resources["kv_cache"].model_copy(update={"hard_floor": hard_floor})
            spec = spec.model_copy(update={"resources": {"kv_cache": kv}})
            contract_ = contract_.model_copy(update={"headroom": spec})
        extra |= {
            "redline": redline_config(spec),
            "headroom_url": engine + "/metrics",
            "headroom_interval": args.scrape,
        }
    return contract_, extra, properties


async def arm(
    name: str, engine: str, trace: Path, base: Contract, args: argparse.Namespace, seed: int
) -> dict[str, Any]:
    """One arm run: the load through a fresh gateway, then its figures and its trace's check."""
    trace.unlink(missing_ok=True)
    deadline = base.tenants["assured"].deadline
    contract_, extra, properties = _arm_setup(name, engine, base, args)
    settings = GatewaySettings(
        upstream=engine,
        keys=KeysConfig(keys=KEYS),
        trace=trace,
        timeout=60.0,
        preempt_grace=0.0,
        send_priority=args.policy == "priority",
        **extra,
    )
    gw = Gateway(contract_, settings)
    answers: list[tuple[int, float, float, float]] = []
    ends = [0, 0]  # [failed or refused, completed]
    async with httpx.AsyncClient(timeout=120.0) as client:
        before = _engine_counters((await client.get(engine + "/metrics")).text)
        async with serving(gw.app) as url:
            stop = asyncio.Event()
            loops = [
                asyncio.ensure_future(_surplus(client, url, stop, ends, args.surplus_tokens))
                for _ in range(0 if name.startswith("alone") else args.surplus)
            ]
            if name.endswith("scrape"):
                loops.append(asyncio.ensure_future(_scrape(client, engine, stop)))
            await _assured(
                client, url, args.seconds, args.rate, answers, args.assured_prompt, seed, args.stream
            )
            stop.set()
            await asyncio.gather(*loops)
        after = _engine_counters((await client.get(engine + "/metrics")).text)
    missed = sum(1 for code, dt, *_ in answers if code != 200 or dt > deadline)
    excess = sum(1 for code, *_ in answers if code == 429)
    report = check_trace(str(trace), contract_, properties=properties)
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
    served = sorted(dt if code == 200 else math.inf for code, dt, *_ in answers if code != 429)
    streamed = [(dt, first, gap) for code, dt, first, gap in answers if code == 200 and not math.isnan(first)]
    ttft = [first for _, first, _ in streamed]
    decode = [dt - first for dt, first, _ in streamed]
    # a late answer either waited before its first token (queued in the engine) or stalled
    # between two tokens (its sequence preempted by the engine and recomputed), not slow steps
    late = [(first, gap) for dt, first, gap in streamed if dt > deadline]
    queue, in_engine = _assured_split(events)
    readings = [e["value"] for e in events if e["kind"] == "sample" and e["resource"] == "kv_cache"]
    queued_n = after["queue_n"] - before["queue_n"]
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
        "assured_guard_queue_s": _med(queue),
        "assured_after_dispatch_s": _med(in_engine),
        "assured_ttft_s": _med(ttft),
        "assured_after_first_token_s": _med(decode),
        "late_waited_first": sum(1 for first, _ in late if first > deadline / 2),
        "late_stalled": sum(1 for first, gap in late if gap > deadline / 2 and first <= deadline / 2),
        "engine_queue_mean_s": (after["queue_s_sum"] - before["queue_s_sum"]) / max(1.0, queued_n),
        "surplus_completed": ends[1],
        "surplus_refused_or_preempted": ends[0],
        "engine_preemptions": after["preemptions"] - before["preemptions"],
        "demoted": kinds.get("demote", 0),
        "preempted_by_guard": sum(
            1 for e in events if e["kind"] == "fail" and e.get("reason") == "preempted"
        ),
        "samples": kinds.get("sample", 0),
        "samples_kv_full": sum(1 for v in readings if v >= 1.0) / len(readings) if readings else math.nan,
        "samples_kv_min": min(readings, default=math.nan),
        "trace_events": kinds,
        "check_properties": list(properties),
        "check_holds": report.holds,
        "violations": [v.to_dict() for v in report.violations][:5],
        "assured_answers": answers,  # (status, seconds, first token, longest gap) each
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


@contextlib.contextmanager
def engine(venv: Path, args: argparse.Namespace, log: Path) -> Iterator[str]:
    """A small-KV vLLM CPU engine on 127.0.0.1 (`pinned_engine`), killed on exit.

    With ``--pin`` the engine's processes (and its OpenMP threads) run on CPU 1 only.
    """
    small_kv = (
        "--num-gpu-blocks-override", str(args.kv_blocks), "--block-size", str(args.block_size),
        "--max-model-len", str(args.max_model_len),
    )  # fmt: skip
    cpu = 1 if args.pin else None
    with pinned_engine(
        log, venv=venv, cpu=cpu, policy=args.policy, model_args=small_kv, start_timeout=300.0
    ) as running:
        yield running.url


async def run(args: argparse.Namespace, url: str, out: Path) -> dict[str, Any]:
    arms = args.arms.split(",")
    base = contract(
        args.deadline,
        args.alpha,
        args.dwell,
        output_cap=max(250, args.surplus_tokens),
        h_min=args.h_min,
        margin=args.margin,
        hard_floor=args.hard_floor,
        reserve=args.reserve,
    )
    runs: list[dict[str, Any]] = []
    for i in range(args.pairs):
        for name in arms if i % 2 == 0 else arms[::-1]:
            t0 = time.time()
            load = os.getloadavg()[0]
            trace = out / f"{name.replace('+', '_').replace('/', '_')}-{i}.jsonl"
            r = await arm(name, url, trace, base, args, seed=1000 * i + len(runs))
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
    p.add_argument("--alpha", type=float, default=0.5, help="the headroom block's EWMA weight")
    p.add_argument("--dwell", type=int, default=2, help="the headroom block's dwell (fresh samples)")
    p.add_argument("--pairs", type=int, default=1, help="rounds of all the arms, order reversed every other")
    p.add_argument("--h-min", type=float, default=0.35, help="the KV headroom's h_min")
    p.add_argument("--margin", type=float, default=0.15, help="the KV headroom's hysteresis margin")
    p.add_argument("--hard-floor", type=float, default=0.1, help="the KV headroom's hard floor")
    p.add_argument("--reserve", type=int, default=0, help="R in every arm (the reserve arms: R + 1)")
    p.add_argument("--assured-prompt", type=int, default=0, help="assured prompt tokens (0: one word)")
    p.add_argument("--surplus-tokens", type=int, default=250, help="surplus output tokens")
    p.add_argument("--kv-blocks", type=int, default=12, help="the engine's KV blocks")
    p.add_argument("--block-size", type=int, default=32, help="tokens a KV block")
    p.add_argument("--max-model-len", type=int, default=256)
    p.add_argument("--scrape", type=float, default=SCRAPE, help="seconds between two /metrics reads")
    p.add_argument("--stream", action="store_true", help="assured streamed (time to first token)")
    p.add_argument("--pin", action="store_true", help="engine on CPU 1, this script on CPU 0")
    args = p.parse_args()
    if (args.engine is None) == (not args.start_engine):
        p.error("give exactly one of --engine and --start-engine")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.pin:
        os.sched_setaffinity(0, {0})
    if args.start_engine:
        with engine(Path(args.venv), args, out / "engine.log") as url:
            result = asyncio.run(run(args, url, out))
    else:
        result = asyncio.run(run(args, args.engine, out))
    (out / "summary.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result["summary"], indent=2, default=str))


if __name__ == "__main__":
    main()
