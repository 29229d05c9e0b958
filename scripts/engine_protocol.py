"""Engine evidence under the pinned protocol: experiments through the gateway on a pinned vLLM CPU engine.

    RVGUARD_VLLM_VENV=/path/.venv-vllm .venv/bin/python scripts/engine_protocol.py \\
        --start-engine corner fifo-ablation deadline-sweep beta-sweep \\
        [--reps N] [--duration S] [--only arm=guard] [--out docs/engine]

The protocol (`rvguard.study.pinned`, docs/experiments.md "Engine evidence"): one experiment at a
time; the engine on CPU 1 (``taskset -c 1``, one OpenMP thread), this process (the gateway, in
process, and the open-loop client) on CPU 0; before every arm k is re-measured (the path's
sustained capacity, ``--capacity-seconds``); the machine's 1-minute load is recorded before and
after, with the CPU the run's own processes and all the others used; an arm whose foreign CPU
passed ``--foreign`` (or, with ``--threshold``, whose load beyond its own processes passed that) is
marked contended and run again (``--attempts``). Each experiment's ``--json`` document goes to
``OUT/NAME.json`` with a ``protocol`` block; each run's trace to ``OUT/traces/NAME/`` (gzip) beside
the scaled contract it is judged against:

    gunzip -c OUT/traces/NAME/STEM.jsonl.gz | rvguard check - --contract OUT/traces/NAME/STEM.contract.json

``--only KEY=V1,V2`` keeps the arms whose parameter KEY is one of the values (repeatable; the
values compared as text). ``--duration`` shortens every arm's load (the study's seconds, before k).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from pinned_engine import VENV, pin_self, pinned_engine  # noqa: E402

from rvguard.sim.catalog import DEFAULT_CONTRACTS, EXPERIMENTS  # noqa: E402
from rvguard.sim.loads import MARQUEE_CONTRACT  # noqa: E402
from rvguard.sim.runner import Arm  # noqa: E402
from rvguard.study.live import LIVE_TOKENS, LiveRunner, path_capacity  # noqa: E402
from rvguard.study.pinned import FOREIGN, THRESHOLD, PinnedRunner, corner, cpu_sample, group_pids  # noqa: E402

RUNNABLE = {**EXPERIMENTS, "corner": corner}


def _keep(only: list[str]) -> Any:
    wanted: dict[str, set[str]] = {}
    for item in only:
        key, _, values = item.partition("=")
        wanted.setdefault(key, set()).update(values.split(","))

    def keep(arm: Arm) -> bool:
        return all(str(arm.params.get(k)) in vs for k, vs in wanted.items())

    return keep


def run(args: argparse.Namespace, url: str, model: str, pgid: int | None, command: list[str]) -> None:
    out = Path(args.out)
    own = [os.getpid()]

    def sample() -> Any:
        return cpu_sample(own + (group_pids(pgid) if pgid is not None else []))

    def capacity() -> Any:
        return path_capacity(url, model, slots=4, tokens=LIVE_TOKENS, seconds=args.capacity_seconds)

    for name in args.experiments:
        live = LiveRunner(url, model=model, scale=1.0, traces=out / "traces" / name)
        partial = ROOT / "build" / f"engine-protocol-{name}.partial.jsonl"
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text("")

        def finished(cond: Any, partial: Path = partial) -> None:  # kept if the run is stopped early
            with partial.open("a") as f:
                f.write(json.dumps(cond.to_dict(), allow_nan=False) + "\n")

        runner = PinnedRunner(
            live,
            capacity=capacity,
            sample=sample,
            threshold=args.threshold,
            foreign=args.foreign,
            attempts=args.attempts,
            keep=_keep(args.only),
            duration=args.duration,
            progress=lambda s: print(s, file=sys.stderr, flush=True),
            finished=finished,
        )
        started = time.time()
        contract = DEFAULT_CONTRACTS.get(name) or MARQUEE_CONTRACT
        kwargs: dict[str, Any] = {"seed": args.seed, "runner": runner}
        if args.reps is not None:
            kwargs["reps"] = args.reps
        doc = RUNNABLE[name](contract, **kwargs).to_dict()
        doc["protocol"] = {
            "engine": " ".join(command) if command else url,
            "engine_cpu": args.engine_cpu,
            "client_cpu": 0 if args.pin else None,
            "reps": args.reps,
            "duration": args.duration,
            "only": args.only,
            "threshold": args.threshold,
            "foreign_bound": args.foreign,
            "attempts": args.attempts,
            "capacity_seconds": args.capacity_seconds,
            "learner_fit": live.info.get("learner_fit"),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        print(f"{name}: {len(doc['conditions'])} conditions -> {out / (name + '.json')}", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiments", nargs="+", choices=sorted(RUNNABLE))
    p.add_argument("--engine", help="a running engine's URL (else --start-engine)")
    p.add_argument("--engine-pgid", type=int, default=None, help="its process group (its CPU counts as own)")
    p.add_argument("--start-engine", action="store_true", help="start the engine pinned, kill it at the end")
    p.add_argument("--venv", default=str(VENV))
    p.add_argument("--engine-cpu", type=int, default=1, help="the engine's CPU (-1: not pinned)")
    p.add_argument("--no-pin", dest="pin", action="store_false", help="leave this process unpinned")
    p.add_argument("--reps", type=int, default=None, help="runs per condition (default: the experiment's)")
    p.add_argument("--duration", type=float, default=None, help="each arm's load, study seconds")
    p.add_argument("--only", action="append", default=[], help="KEY=V1,V2: keep only these arms")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threshold",
        type=float,
        default=THRESHOLD,
        help="also contended: load beyond own processes above this (default off)",
    )
    p.add_argument("--foreign", type=float, default=FOREIGN, help="CPU cores the others may use")
    p.add_argument("--attempts", type=int, default=2, help="runs of a contended arm")
    p.add_argument("--capacity-seconds", type=float, default=10.0, help="k's measurement before an arm")
    p.add_argument("--out", default="results/engine")
    args = p.parse_args()
    if (args.engine is None) == (not args.start_engine):
        p.error("give exactly one of --engine and --start-engine")
    if args.pin:
        pin_self(0)
    if args.start_engine:
        cpu = None if args.engine_cpu < 0 else args.engine_cpu
        log = ROOT / "build" / "engine-protocol.log"
        with pinned_engine(log, venv=Path(args.venv), cpu=cpu) as eng:
            run(args, eng.url, eng.model, eng.pgid, list(eng.command))
    else:
        model = asyncio.run(_model(args.engine))
        run(args, args.engine, model, args.engine_pgid, [])


async def _model(url: str) -> str:
    import httpx

    async with httpx.AsyncClient(timeout=10.0) as client:
        return str((await client.get(url.rstrip("/") + "/v1/models")).json()["data"][0]["id"])


if __name__ == "__main__":
    main()
