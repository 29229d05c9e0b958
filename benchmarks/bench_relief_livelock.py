"""Issue 24's relief livelock on the real vLLM CPU engine, with the official `openai` SDK.

    RVGUARD_VLLM_VENV=/path/.venv-vllm .venv/bin/python benchmarks/bench_relief_livelock.py \\
        [--seconds 30] [--clients 6] [--hold-bound 10] [--timeout 60] [--json OUT]

One small-KV engine (``scripts/pinned_engine.py``: the tiny random-weight Llama pinned to CPU 1,
first come first served, 8 slots, 160 blocks of 32 tokens = 5,120 tokens of KV, no prefix cache)
and, for each arm, ``rvguard serve`` in front of it (this process and the gateway on CPU 0) with the
redline on the engine's ``/metrics`` read every 50 ms (h_min 0.35, margin 0.1, hard floor 0.2):

* ``bare``: ``--bare-preemption``: past the hard floor every running surplus request is preempted
  and the redline restores every held one at once (the behaviour before rationing);
* ``rationed``: ``--relief-capacity 5120 --hold-bound B``: the fewest preempted, held requests
  restored as the headroom allows, a held request answered 503 at the bound.

``--clients`` opportunistic `openai` SDK clients (``AsyncOpenAI``: its default retries, the stated
``--timeout``) each keep one completion outstanding for ``--seconds`` (a prompt of 128 random token
ids, 896 tokens out with ``ignore_eos``: 1,024 tokens = 32 blocks at its largest; the next call when
the last returns). Each request grows its KV as it generates; six of them want 192 blocks of 160,
and the hard floor leaves room for four (what the engine holds above the floor, its sustainable
level; three above h_min). Before the arms, that many requests straight to the engine (streamed, as
the gateway asks) time one request at the sustainable level, so the level is also a count of
completions over the run.

Printed per arm: the SDK's calls completed and failed (by the status of their last answer), the
answers the SDK saw (each retry included, from an httpx hook), the trace's dispatches, preemptions
and hold-bound answers (503), the longest a request stayed held (demote to restore or end), the wall
time (until the last call returned), the engine's own preemptions (``vllm:num_preemptions_total``)
and the trace judged by AF, DR, WF, RB, RL and PR (``rvguard check``). Figures: docs/headroom.md,
"The live livelock case". Not in ``make bench``: it needs the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import openai
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from pinned_engine import VENV, pin_self, pinned_engine  # noqa: E402

import rvguard  # noqa: E402
from rvguard.check import check_trace  # noqa: E402
from rvguard.contract import Contract, contract_from_mapping  # noqa: E402

SLOTS, BLOCK, BLOCKS = 8, 32, 160
PROMPT, OUTPUT = 128, 896
H_MIN, MARGIN, HARD_FLOOR = 0.35, 0.1, 0.2
KEYS = {"sk-opp": "opportunistic", "sk-assured": "assured"}
#: the answers of the call running in this task (the SDK's retries included)
_ATTEMPTS: contextvars.ContextVar[list[int]] = contextvars.ContextVar("attempts")
JUDGED = ("AF", "DR", "WF", "RB", "RL", "PR")
ENGINE_ARGS = (
    "--max-model-len", str(PROMPT + OUTPUT), "--num-gpu-blocks-override", str(BLOCKS),
    "--block-size", str(BLOCK), "--no-enable-prefix-caching",
)  # fmt: skip


def geometry(
    blocks: int = BLOCKS, block: int = BLOCK, prompt: int = PROMPT, output: int = OUTPUT
) -> dict[str, int]:
    """The KV cache's tokens, one request's footprint at its largest (whole blocks), and how many
    such requests run to completion with the headroom at or above the hard floor and ``h_min``."""
    capacity = blocks * block
    footprint = math.ceil((prompt + output) / block) * block
    return {
        "capacity": capacity,
        "footprint": footprint,
        "above_floor": math.floor((1.0 - HARD_FLOOR) * capacity / footprint),
        "above_h_min": math.floor((1.0 - H_MIN) * capacity / footprint),
    }


def livelock_contract() -> Contract:
    """8 slots; an assured tenant (sent nothing here) and the opportunistic surplus; the redline."""
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": SLOTS,
            "output_cap": OUTPUT,
            "service": {"s_max": 120.0, "s_max_opp": 120.0, "lower": 0.0},
            "tenants": {
                "assured": {"floor": 1, "deadline": 120.0, "tier": 0},
                "opportunistic": {"floor": 0, "deadline": 600.0, "tier": 1},
            },
            "headroom": {
                "alpha": 0.9,
                "dwell": 1,
                "staleness": 3.0,
                "resources": {"kv_cache": {"h_min": H_MIN, "margin": MARGIN, "hard_floor": HARD_FLOOR}},
            },
        }
    )


def prompt(rng: random.Random) -> list[int]:
    """``PROMPT`` random token ids (the tiny Llama's vocabulary is 384): no shared prefix."""
    return [rng.randrange(3, 384) for _ in range(PROMPT)]


async def _direct(client: httpx.AsyncClient, url: str, rng: random.Random) -> float:
    """One streamed request straight to the engine; its seconds."""
    body = {"model": "tiny", "prompt": prompt(rng), "max_tokens": OUTPUT, "ignore_eos": True, "stream": True}
    t0 = time.perf_counter()
    async with client.stream("POST", url + "/v1/completions", json=body) as r:
        r.raise_for_status()
        async for _ in r.aiter_bytes():
            pass
    return time.perf_counter() - t0


async def calibrate(url: str, concurrent: int, rounds: int = 3) -> float:
    """The median seconds of one request among ``concurrent`` sent together straight to the engine
    (after one warm-up request): a request's time at the sustainable level."""
    rng = random.Random(7)
    async with httpx.AsyncClient(timeout=300.0) as client:
        await _direct(client, url, rng)
        times: list[float] = []
        for _ in range(rounds):
            times += await asyncio.gather(*(_direct(client, url, rng) for _ in range(concurrent)))
    return statistics.median(times)


async def engine_preemptions(url: str) -> float:
    """vLLM's own count of preempted sequences (``vllm:num_preemptions_total``)."""
    async with httpx.AsyncClient(timeout=10.0) as client:
        text = (await client.get(url + "/metrics")).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_preemptions_total")
    )


class Clients:
    """``n`` closed-loop `openai` SDK clients: what each call ended with, and every answer seen."""

    def __init__(self, url: str, n: int, timeout: float, seed: int = 1) -> None:
        self.url, self.n, self.timeout = url, n, timeout
        self.rng = random.Random(seed)
        self.calls: Counter[str] = Counter()  # "ok", the last answer's status and code, "timeout"
        self.answers: Counter[int] = Counter()  # every HTTP answer the SDK got, retries included
        self.call_seconds: list[float] = []
        self.chains: Counter[str] = Counter()  # each call's answers in order ("503 503 200"): calls

    async def _seen(self, response: httpx.Response) -> None:
        self.answers[response.status_code] += 1
        _ATTEMPTS.get().append(response.status_code)  # the hook runs in the calling task

    async def _call(self, client: openai.AsyncOpenAI) -> None:
        t0 = time.perf_counter()
        _ATTEMPTS.set(attempts := [])
        try:
            await client.completions.create(
                model="tiny", prompt=prompt(self.rng), max_tokens=OUTPUT, extra_body={"ignore_eos": True}
            )
            self.calls["ok"] += 1
        except openai.APIStatusError as e:  # the status and the guard's reason (error.code)
            self.calls[f"{e.status_code} {e.code}" if e.code else str(e.status_code)] += 1
        except openai.APITimeoutError:
            self.calls["timeout"] += 1
        except openai.APIConnectionError:
            self.calls["connection"] += 1
        self.call_seconds.append(time.perf_counter() - t0)
        self.chains[" ".join(map(str, attempts))] += 1

    async def run(self, seconds: float) -> float:
        """Every client calls until ``seconds`` have passed; the wall time until the last returned."""
        http = openai.DefaultAsyncHttpxClient(event_hooks={"response": [self._seen]})
        client = openai.AsyncOpenAI(
            base_url=self.url + "/v1", api_key="sk-opp", timeout=self.timeout, http_client=http
        )
        t0 = time.perf_counter()

        async def loop() -> None:
            while time.perf_counter() - t0 < seconds:
                await self._call(client)

        async with client:
            await asyncio.gather(*(loop() for _ in range(self.n)))
        return time.perf_counter() - t0


def held_seconds(events: list[dict[str, Any]]) -> list[float]:
    """How long each demoted request stayed held: demote to its restore or its end."""
    since: dict[str, float] = {}
    out: list[float] = []
    for e in events:
        rid, kind = e.get("rid"), e["kind"]
        if kind == "demote":
            since.setdefault(rid, e["t"])
        elif rid in since and kind in ("restore", "dispatch", "fail", "drop", "reject", "complete"):
            out.append(e["t"] - since.pop(rid))
    return out


def trace_counts(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The trace's arrivals, dispatches, completions, preemptions, hold-bound answers, demotions,
    restores and samples, and the longest hold."""
    kinds = Counter(e["kind"] for e in events)
    fails = Counter(e.get("reason", "") for e in events if e["kind"] == "fail")
    held = held_seconds(events)
    return {
        "arrivals": kinds["arrive"],
        "dispatches": kinds["dispatch"],
        "completed": kinds["complete"],
        "preempted": fails["preempted"],
        "hold_bound": fails["hold-bound"],
        "other_fails": {k: v for k, v in fails.items() if k not in ("preempted", "hold-bound")},
        "demoted": kinds["demote"],
        "restored": kinds["restore"],
        "samples": kinds["sample"],
        "longest_held_s": round(max(held), 2) if held else 0.0,
    }


def serve_command(
    arm: str, spec: Path, keys: Path, trace: Path, engine: str, port: int, hold_bound: float
) -> list[str]:
    """``rvguard serve`` for one arm (``bare`` or ``rationed``)."""
    relief = ["--bare-preemption"] if arm == "bare" else ["--relief-capacity", str(geometry()["capacity"])]
    if arm == "rationed":
        relief += ["--hold-bound", str(hold_bound)]
    return [
        sys.executable, "-m", "rvguard.cli", "serve", str(spec), "--upstream", engine,
        "--port", str(port), "--keys", str(keys), "--trace", str(trace), "--no-priority",
        "--headroom", "--headroom-interval", "0.05", "--log-level", "warning", *relief,
    ]  # fmt: skip


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """The gateway process, importing the ``rvguard`` this script imports (from ``benchmarks/``)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(rvguard.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])}
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, cwd=ROOT / "benchmarks", env=env, stdout=out, stderr=subprocess.STDOUT)


async def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until the gateway answers ``/healthz`` (30 s at most)."""
    async with httpx.AsyncClient(timeout=1.0) as client:
        for _ in range(300):
            if proc.poll() is not None:
                raise SystemExit(f"rvguard serve exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if (await client.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"rvguard serve not ready: {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT (the gateway drains and closes its trace), SIGKILL if it lingers."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def run_arm(arm: str, engine: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One arm: its gateway, the clients for ``args.seconds``, the trace read and judged."""
    c = livelock_contract()
    spec, keys, trace, log = (
        out / "contract.yaml",
        out / "keys.yaml",
        out / f"{arm}.jsonl",
        out / f"{arm}.log",
    )
    spec.write_text(yaml.safe_dump(c.model_dump(mode="json", exclude_none=True)))
    keys.write_text(yaml.safe_dump({"keys": KEYS}))
    for old in out.glob(f"{arm}*.jsonl"):
        old.unlink()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve(serve_command(arm, spec, keys, trace, engine, port, args.hold_bound), log)
    try:
        await wait_ready(url, proc, log)
        before = await engine_preemptions(engine)
        clients = Clients(url, args.clients, args.timeout)
        wall = await clients.run(args.seconds)
        engine_pre = await engine_preemptions(engine) - before
    finally:
        await asyncio.to_thread(stop, proc)
    events = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    report = check_trace(str(trace), c, properties=JUDGED)
    return {
        "arm": arm,
        "calls": dict(clients.calls),
        "answers": {str(k): v for k, v in sorted(clients.answers.items())},
        "chains": dict(clients.chains),
        "median_call_s": round(statistics.median(clients.call_seconds), 2) if clients.call_seconds else None,
        "wall_s": round(wall, 1),
        "engine_preemptions": engine_pre,
        **trace_counts(events),
        "violations": len(report.violations),
    }


def show(geo: dict[str, int], service: float, seconds: float, rows: list[dict[str, Any]]) -> None:
    """One line of what the engine holds, then one block per arm."""
    level = geo["above_floor"] * seconds / service
    print(
        f"KV {geo['capacity']} tokens, {geo['footprint']} per request at its largest: the engine holds "
        f"{geo['above_floor']} above the hard floor ({geo['above_h_min']} above h_min); one request "
        f"takes {service:.2f} s at that level, so {level:.0f} completions in {seconds:g} s"
    )
    for r in rows:
        print(
            f"{r['arm']:>9}: calls {r['calls']}  answers {r['answers']}  dispatches {r['dispatches']}  "
            f"completed {r['completed']}  preempted {r['preempted']}  hold-bound {r['hold_bound']}  "
            f"longest held {r['longest_held_s']} s  wall {r['wall_s']} s  engine preemptions "
            f"{r['engine_preemptions']:g}  demoted {r['demoted']} restored {r['restored']}  "
            f"samples {r['samples']}  other fails {r['other_fails']}  violations {r['violations']}\n"
            f"{'':>11}each call's answers (retries included): {r['chains']}"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0, help="each arm's clients call this long")
    p.add_argument("--clients", type=int, default=6, help="opportunistic SDK clients (default 6)")
    p.add_argument("--hold-bound", type=float, default=10.0, help="the rationed arm's --hold-bound")
    p.add_argument("--timeout", type=float, default=60.0, help="the SDK's time-out per attempt")
    p.add_argument("--arms", default="bare,rationed", help="comma-separated: bare, rationed")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument(
        "--out",
        default=str(ROOT / "build" / "relief-livelock"),
        help="the engine's and gateways' logs, the traces",
    )
    args = p.parse_args()
    pin_self(0)
    geo = geometry()
    out = Path(args.out).resolve()  # the gateway runs from benchmarks/
    out.mkdir(parents=True, exist_ok=True)
    with pinned_engine(
        out / "engine.log", venv=VENV, policy="fcfs", slots=SLOTS, model_args=ENGINE_ARGS
    ) as engine:
        service = asyncio.run(calibrate(engine.url, geo["above_floor"]))
        rows = [asyncio.run(run_arm(arm, engine.url, out, args)) for arm in args.arms.split(",")]
    show(geo, service, args.seconds, rows)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"geometry": geo, "service_s": service, "arms": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
