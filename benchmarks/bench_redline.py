"""Redline cost per sample: `Redline.observe` against a bare EWMA update, in the same run.

Run: ``python benchmarks/bench_redline.py [--samples N]``. A noisy two-resource signal with
jittered timestamps, 5 % duplicates (stale samples) and glitches; medians over repeats. The
baseline is one multiply-add per sample (the runbook's "one multiply and one add"): the ratio
says what validation, the trend, hysteresis and the dominant-resource choice cost on top.
Then the decision core's cost per request with the redline on against the same core without
it: N requests (assured and opportunistic, admit-all, C = 4) each arriving and finishing, and,
with the redline, one headroom sample every ``--every`` requests from the same signal (so the
redline fires, demotes the queued surplus, clears and restores it). The Guard's own added cost
is this plus its telemetry task (one scrape per interval, off the request path).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from rvguard.contract import contract_from_mapping
from rvguard.enforce.core import DecisionCore
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=50_000)
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


if __name__ == "__main__":
    main()
