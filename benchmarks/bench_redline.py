"""Redline cost per sample: `Redline.observe` against a bare EWMA update, in the same run.

Run: ``python benchmarks/bench_redline.py [--samples N]``. A noisy two-resource signal with
jittered timestamps, 5 % duplicates (stale samples) and glitches; medians over repeats. The
baseline is one multiply-add per sample (the runbook's "one multiply and one add"): the ratio
says what validation, the trend, hysteresis and the dominant-resource choice cost on top.
Then the decision core's cost per request with the redline on against the same core without
it: N requests (assured and opportunistic, admit-all, C = 4) each arriving and finishing, and,
with the redline, one headroom sample every ``--every`` requests from the same signal (so the
redline fires, demotes the queued surplus, clears and restores it). Then the asyncio `Guard`
itself (``--guard-requests``): the same contract and arrivals submitted as tasks through a
zero-latency dispatcher, once without a redline and twice with it (a steady signal that never
fires it, and the noisy signal above), fed by a plain callable
headroom source (`CallableHeadroomSource`, the Guard's ``headroom=`` option, as ``serve
--headroom`` wires its scrape): the driver calls the Guard's `HeadroomLoop.poll` every
``--every`` requests (what the loop's task does once per ``headroom_interval``; the task itself
is left asleep so the sample count is the same in every run). The callers form a closed loop of
16 (a new arrival once one has finished, so the queue stays short and arrivals never outrun
the zero-latency service); when all 16 wait on held surplus, time passes and the source is read
again, as the loop's task would. A `ManualClock` advances 10 ms a
request, so a sample is 100 ms after the last and the horizon is two sample periods (as 30 s is
for 15 s scrapes). The arms alternate; each ratio is the median of the pairs' ratios, by this
process's CPU time and by wall clock, after one discarded warm-up pair.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import statistics
import time
from collections import Counter
from collections.abc import Mapping

from rvguard.clock import ManualClock
from rvguard.contract import contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import CallableDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.headroom import CallableHeadroomSource
from rvguard.enforce.redline import HeadroomSample, Redline, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.events import Proposal

REPEATS = 7
SEED = 12
CONFIG = RedlineConfig(
    (ResourceLimit("kv_cache", 0.2, 0.1, 0.05), ResourceLimit("seqs", 0.1, 0.05)), alpha=0.3, horizon=30.0
)


def signal(n: int) -> list[HeadroomSample]:
    """A seeded noisy signal: jittered 15 s scrapes, glitches to 0, 5 % duplicated samples."""
    rng, t, out = random.Random(SEED), 0.0, []
    for i in range(n):
        if not (out and rng.random() < 0.05):
            t += 15.0 + rng.uniform(-0.3, 0.3)
        value = 0.0 if rng.random() < 0.02 else min(1.0, max(0.0, 0.5 + 0.3 * rng.gauss(0.0, 1.0)))
        out.append(HeadroomSample("kv_cache" if i % 2 else "seqs", value, t))
    return out


def per_sample(fn: object, samples: list[HeadroomSample]) -> float:
    """Median seconds per sample over REPEATS runs of ``fn(samples)``."""
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn(samples)  # type: ignore[operator]
        times.append((time.perf_counter() - t0) / len(samples))
    return statistics.median(times)


def run_redline(samples: list[HeadroomSample]) -> None:
    observe = Redline(CONFIG).observe
    for s in samples:
        observe(s)


def run_ewma(samples: list[HeadroomSample]) -> None:
    h, a = 0.0, CONFIG.alpha
    for s in samples:
        h = a * s.value + (1.0 - a) * h


CONTRACT = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 4,
        "service": {"s_max": 0.66},
        "tenants": {
            "assured": {"floor": 6, "deadline": 1.82},
            "opp": {"floor": 0, "deadline": 1.82, "tier": 1},
        },
    }
)


def run_core(n: int, samples: list[HeadroomSample] | None, every: int) -> float:
    """Seconds per request through the core (arrive, dispatch, finish), with or without samples."""
    times = []
    for _ in range(REPEATS):
        core = DecisionCore(CONTRACT, redline=CONFIG if samples is not None else None)
        yes, running, k = Proposal(), [], 0
        t0 = time.perf_counter()
        for i in range(n):
            now = i * 0.01
            out = []
            if samples is not None and i % every == 0:
                out = core.observe(samples[k % len(samples)], now)
                k += 1
            out += core.arrive(Request(f"r{i}", "opp" if i % 3 else "assured", now), yes, now)
            running += [e.rid for e in out if e.kind.value == "dispatch"]
            if len(running) >= 4:
                for e in core.finish(running.pop(0), now):
                    if e.kind.value == "dispatch":
                        running.append(e.rid)
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


GUARD_TICK = 0.01  # seconds of the Guard's ManualClock per request
WINDOW = 16  # submits outstanding at most (a closed loop of callers: arrivals never outrun service)
GUARD_CONFIG = RedlineConfig(
    (ResourceLimit("kv_cache", 0.2, 0.1, 0.05), ResourceLimit("seqs", 0.1, 0.05)), alpha=0.3, horizon=0.2
)


async def _zero(request: Request) -> Response:
    return Response()


class _Signal:
    """The callable headroom source's function: ``values`` in turn, both resources per read;
    ``healthy`` (the drain at the end) reads full headroom so every held request goes."""

    def __init__(self, values: list[float]) -> None:
        self._values = itertools.cycle(values)
        self.healthy = False

    def __call__(self) -> Mapping[str, float]:
        if self.healthy:
            return {"kv_cache": 1.0, "seqs": 1.0}
        return {"kv_cache": next(self._values), "seqs": next(self._values)}


async def _drive(n: int, every: int, signal_fn: _Signal | None, kinds: Counter[str]) -> tuple[float, float]:
    """N submits as tasks through one Guard (C = 4, zero-latency dispatcher); with ``signal_fn``,
    the redline on and `HeadroomLoop.poll` every ``every`` requests. Returns (CPU s, wall s)."""
    clock = ManualClock()
    source = None if signal_fn is None else CallableHeadroomSource(signal_fn, clock)
    guard = Guard(
        CONTRACT,
        CallableDispatcher(_zero),
        clock=clock,
        sinks=[lambda ev: kinds.update((ev.kind.value,))],
        headroom=source,
        config=GuardConfig(
            redline=None if source is None else GUARD_CONFIG,
            headroom_interval=3600.0,  # the loop's task reads once at start; the driver polls
        ),
    )
    spawn = asyncio.get_running_loop().create_task
    open_: list[int] = [0]  # submits not finished (a done callback counts them down)

    def done(_: object) -> None:
        open_[0] -= 1

    async def poll() -> None:
        if guard.headroom is not None:
            await guard.headroom.poll()

    async with guard:
        c0, w0 = time.process_time(), time.perf_counter()
        tasks = []
        for i in range(n):
            now = clock.advance(GUARD_TICK)
            task = spawn(guard.submit(Request(f"r{i}", "opp" if i % 3 else "assured", now)))
            task.add_done_callback(done)
            tasks.append(task)
            open_[0] += 1
            if i % every == 0:
                await poll()
            spins = 0
            while open_[0] >= WINDOW:  # the callers wait: the next arrives once one has finished
                await asyncio.sleep(0)
                spins += 1
                if spins % WINDOW == 0:  # all held: time passes and the telemetry is read again
                    clock.advance(GUARD_TICK)
                    await poll()
        if signal_fn is not None:
            signal_fn.healthy = True
        redline = guard.core.redline
        while redline is not None and redline.firing:  # release the held
            clock.advance(GUARD_TICK)
            await poll()
        await asyncio.gather(*tasks)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return cpu, wall


#: the Guard's arms: no redline; the redline on a steady 0.9 headroom (never fires: the cost of
#: having it on); the redline on the seeded noisy signal (fires, demotes, clears, restores)
ARMS = ("without", "quiet", "noisy")


def run_guard(n: int, every: int, samples: list[HeadroomSample]) -> dict[str, list[tuple[float, float]]]:
    """Alternating runs of the three arms: per-request (CPU s, wall s) of each run, by arm."""
    noisy = [s.value for s in samples]

    def signal_of(arm: str) -> _Signal | None:
        return None if arm == "without" else _Signal([0.9] if arm == "quiet" else noisy)

    for arm in ARMS:  # warm-up, discarded
        asyncio.run(_drive(n, every, signal_of(arm), Counter()))
    out: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
    kinds: dict[str, Counter[str]] = {}
    for _ in range(REPEATS):
        for arm in ARMS:
            kinds[arm] = Counter()
            cpu, wall = asyncio.run(_drive(n, every, signal_of(arm), kinds[arm]))
            out[arm].append((cpu / n, wall / n))
    for arm in ARMS[1:]:
        shown = ", ".join(f"{kinds[arm][k]} {k}" for k in ("sample", "demote", "restore", "complete"))
        print(f"  ({arm}: one run traced {shown})")
    return out


def _report_guard(n: int, every: int, samples: list[HeadroomSample]) -> None:
    runs = run_guard(n, every, samples)
    med = statistics.median
    base = runs["without"]
    for arm in ARMS:
        cpu = med(r[0] for r in runs[arm]) * 1e9
        wall = med(r[1] for r in runs[arm]) * 1e9
        line = f"  {arm:8s} {cpu:8.0f} ns/request CPU, {wall:8.0f} wall"
        if arm != "without":
            rc = med(r[0] / b[0] for r, b in zip(runs[arm], base, strict=True))
            rw = med(r[1] / b[1] for r, b in zip(runs[arm], base, strict=True))
            line += f"   ({rc:.2f}x by CPU, {rw:.2f}x by wall: median of the pairs' ratios)"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--guard-requests", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=10, help="requests per headroom sample")
    args = parser.parse_args()
    samples = signal(args.samples)
    base, redline = per_sample(run_ewma, samples), per_sample(run_redline, samples)
    print(f"samples {args.samples}, medians of {REPEATS}")
    print(f"  bare EWMA update      {base * 1e9:8.0f} ns/sample")
    print(f"  Redline.observe       {redline * 1e9:8.0f} ns/sample   ({redline / base:.1f}x the bare EWMA)")
    fresh = [s for i, s in enumerate(samples) if i == 0 or s.t > samples[i - 1].t]
    plain = run_core(args.requests, None, args.every)
    with_redline = run_core(args.requests, fresh, args.every)
    print(f"core, {args.requests} requests, a sample every {args.every}")
    print(f"  without the redline   {plain * 1e9:8.0f} ns/request")
    extra = (with_redline / plain - 1) * 100
    print(f"  with the redline      {with_redline * 1e9:8.0f} ns/request   (+{extra:.0f}%)")
    print(f"Guard, {args.guard_requests} requests, zero-latency dispatcher, a poll every {args.every}")
    _report_guard(args.guard_requests, args.every, samples)


if __name__ == "__main__":
    main()
