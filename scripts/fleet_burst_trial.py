"""The fleet burst trial by hand (issue 28): two `rvguard serve` replicas over one real Redis.

As a careless operator would run it, on whatever load the machine has: a fresh
``redis-server`` on a free port of 127.0.0.1 (no snapshots), one fake upstream
(`rvguard.gateway.fake.FakeUpstream`, its own process), and two ``rvguard serve``
processes ``--credits redis://… --replica r1|r2 --share 0.5`` at the DEFAULT
``--credit-timeout``; a gold tenant with B = 3 per 5 s window. Bursts of 8 gold
requests, alternating replicas, are sent together 10 ms after a window opens: the
first window after both replicas serve HTTP (not waiting for /readyz: a careless
operator does not; its transitions are printed), ``--healthy`` later windows, then with Redis
SIGSTOPped (``--paused`` windows; the pause starts mid-window, before the next
window's join ahead), then ``--resumed`` windows after SIGCONT.

For every burst window it prints the 200s the clients saw, the floor admissions per
replica counted from the raw trace records (this script imports neither the pool nor
the judge), and the load average; then ``rvguard check r1.jsonl r2.jsonl``'s exit and
its AF findings. Want: 3 per healthy window, 1 + 1 per paused window, ≤ 3 always,
no violation, declared refusals only in paused windows.

    python scripts/fleet_burst_trial.py --out /tmp/trial1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

WINDOW = 5.0
FLOOR = 3
OFFERED = 8
ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

CONTRACT = f"""epoch: 0.0
window: {WINDOW}
slots: 8
output_cap: 96
excess: reject
credit: count
service: {{s_max: 1.0, s_max_opp: 1.0, lower: 0.001, upper: null}}
tenants:
  gold: {{floor: {FLOOR}, deadline: 4.0, tier: 0}}
  bronze: {{floor: 0, deadline: 60.0, tier: 1}}
"""
KEYS = "keys:\n  sk-gold: gold\n  sk-bronze: bronze\n"
FAKE = (
    "import asyncio, sys\n"
    "from rvguard.gateway.fake import FakeUpstream\n"
    "async def main():\n"
    "    up = FakeUpstream(token_delay=0.001)\n"
    "    up.port = int(sys.argv[1])\n"
    "    await up.start()\n"
    "    await asyncio.Event().wait()\n"
    "asyncio.run(main())\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


class Fleet:
    """The processes of one trial (each started here is stopped here, by its own pid)."""

    def __init__(self, out: Path, timeout: float | None) -> None:
        self.out = out
        self.timeout = timeout
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.redis_port = free_port()
        self.upstream_port = free_port()
        self.ports = {"r1": free_port(), "r2": free_port()}
        self.env = dict(os.environ, PYTHONPATH=str(ROOT))

    def spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.out / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        out = subprocess.STDOUT
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=out, env=self.env, cwd=self.out)

    def start(self) -> None:
        (self.out / "contract.yaml").write_text(CONTRACT)
        (self.out / "keys.yaml").write_text(KEYS)
        redis = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.redis_port), "--save", ""]
        self.spawn("redis", [*redis, "--appendonly", "no", "--dir", str(self.out)])
        self.spawn("upstream", [PY, "-c", FAKE, str(self.upstream_port)])
        time.sleep(0.5)
        for r, port in self.ports.items():
            cmd = [PY, "-m", "rvguard.cli", "serve", "contract.yaml"]
            cmd += ["--upstream", f"http://127.0.0.1:{self.upstream_port}", "--keys", "keys.yaml"]
            cmd += ["--credits", f"redis://127.0.0.1:{self.redis_port}/0", "--replica", r, "--share", "0.5"]
            cmd += ["--trace", f"{r}.jsonl", "--port", str(port), "--learner", "reject-all"]
            if self.timeout is not None:
                cmd += ["--credit-timeout", str(self.timeout)]
            self.spawn(r, cmd)

    def signal_redis(self, sig: int) -> None:
        os.kill(self.procs["redis"].pid, sig)

    def stop(self) -> None:
        if "redis" in self.procs:
            self.signal_redis(signal.SIGCONT)
        for name in ("r1", "r2", "upstream", "redis"):
            p = self.procs.get(name)
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


async def until_serving(client: httpx.AsyncClient, fleet: Fleet, within: float = 60.0) -> None:
    """Until both replicas answer /healthz (serving; not necessarily ready)."""
    t0 = time.monotonic()
    for port in fleet.ports.values():
        while True:
            try:
                if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() - t0 > within:
                raise SystemExit(f"not serving after {within} s: see {fleet.out}/r*.log")
            await asyncio.sleep(0.05)


async def watch_ready(client: httpx.AsyncClient, fleet: Fleet) -> None:
    """Print each replica's /readyz transitions with the time and window (every 0.1 s)."""
    last: dict[str, int] = {}
    while True:
        for r, port in fleet.ports.items():
            try:
                got = (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code
            except httpx.TransportError:
                got = 0
            if last.get(r) != got:
                now = time.time()
                print(f"  {r} /readyz {got} at t = {now:.3f} (window {math.floor(now / WINDOW)})", flush=True)
                last[r] = got
        await asyncio.sleep(0.1)


async def next_window(skip: int = 0) -> int:
    """Sleep to 10 ms after the next window opens (``skip`` more windows on); its index."""
    now = time.time()
    k = math.floor(now / WINDOW) + 1 + skip
    await asyncio.sleep(k * WINDOW + 0.01 - now)
    return k


async def burst(client: httpx.AsyncClient, fleet: Fleet) -> list[int]:
    body = {"model": "fake", "prompt": "hello", "max_tokens": 2}
    urls = [f"http://127.0.0.1:{p}/v1/completions" for p in fleet.ports.values()]

    async def one(i: int) -> int:
        r = await client.post(urls[i % 2], json=body, headers={"Authorization": "Bearer sk-gold"})
        return r.status_code

    return list(await asyncio.gather(*(one(i) for i in range(OFFERED))))


def floor_admits(out: Path) -> dict[int, Counter[str]]:
    """Floor admissions per window of arrival, per replica, from the raw trace records."""
    got: dict[int, Counter[str]] = {}
    for r in ("r1", "r2"):
        records = [json.loads(x) for x in (out / f"{r}.jsonl").read_text().splitlines()]
        arrived = {x["rid"]: x["t"] for x in records if x.get("kind") == "arrive"}
        for x in records:
            if x.get("kind") == "admit" and x.get("basis") == "floor":
                got.setdefault(math.floor(arrived[x["rid"]] / WINDOW), Counter())[r] += 1
    return got


Plan = list[tuple[str, int, list[int], str]]  # phase, window, statuses, uptime


async def drive(fleet: Fleet, healthy: int, paused: int, resumed: int) -> Plan:
    plan: Plan = []
    async with httpx.AsyncClient(timeout=30) as client:
        watcher = asyncio.ensure_future(watch_ready(client, fleet))
        await until_serving(client, fleet)
        print(f"serving at t = {time.time():.3f} (window {math.floor(time.time() / WINDOW)})", flush=True)
        for i in range(1 + healthy):
            k = await next_window()
            plan.append(("first" if i == 0 else "healthy", k, await burst(client, fleet), uptime()))
        await asyncio.sleep(WINDOW / 2 - 0.5)  # mid-window: before the next window's join ahead
        fleet.signal_redis(signal.SIGSTOP)
        print(f"redis SIGSTOP at t = {time.time():.3f}", flush=True)
        try:
            for _ in range(paused):
                k = await next_window()
                plan.append(("paused", k, await burst(client, fleet), uptime()))
        finally:
            fleet.signal_redis(signal.SIGCONT)
            print(f"redis SIGCONT at t = {time.time():.3f}", flush=True)
        for i in range(resumed):
            k = await next_window(skip=int(i == 0))  # the window after resuming is rejoined ahead
            plan.append(("resumed", k, await burst(client, fleet), uptime()))
        watcher.cancel()
    return plan


def check(out: Path) -> tuple[int, dict[str, Any]]:
    """``rvguard check r1.jsonl r2.jsonl --json``: its exit code and report."""
    cmd = [PY, "-m", "rvguard.cli", "check", "r1.jsonl", "r2.jsonl", "--contract", "contract.yaml", "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=out, env=env, check=False)
    (out / "check.json").write_text(done.stdout + done.stderr)
    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError:
        return done.returncode, {"violations": [{"detail": done.stderr}], "attributed": []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--healthy", type=int, default=8)
    ap.add_argument("--paused", type=int, default=2)
    ap.add_argument("--resumed", type=int, default=2)
    ap.add_argument("--credit-timeout", type=float, default=None, help="default: rvguard serve's own")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print("start:", uptime(), flush=True)
    fleet = Fleet(args.out, args.credit_timeout)
    try:
        fleet.start()
        plan = asyncio.run(drive(fleet, args.healthy, args.paused, args.resumed))
    finally:
        fleet.stop()
    got = floor_admits(args.out)
    want = {"first": FLOOR, "healthy": FLOOR, "paused": 2, "resumed": FLOOR}
    short = 0
    for phase, k, statuses, load in plan:
        n = sum(got.get(k, Counter()).values())
        short += n != want[phase]
        per = dict(sorted(got.get(k, Counter()).items()))
        ok = statuses.count(200)
        print(f"{phase:8} window {k}: floor admits {n} {per} (want {want[phase]}); 200s {ok}; {load}")
    over = [k for k, c in got.items() if sum(c.values()) > FLOOR]
    code, report = check(args.out)
    declared = sorted({a["context"].get("window") for a in report["attributed"] if a["cause"] == "declared"})
    paused = [k for phase, k, _, _ in plan if phase == "paused"]
    print(f"windows over B: {over}; windows off target: {short}")
    faults = len(report["violations"])
    print(f"rvguard check exit {code}: {faults} violations; declared in windows {declared}")
    print(f"  (paused windows {paused}; report in {args.out}/check.json)")
    print("end:", uptime(), flush=True)
    return int(bool(over or short or report["violations"] or not set(declared) <= set(paused)))


if __name__ == "__main__":
    raise SystemExit(main())
