"""Redline cost per sample: `Redline.observe` against a bare EWMA update, in the same run.

Run: ``python benchmarks/bench_redline.py [--samples N]``. A noisy two-resource signal with
jittered timestamps, 5 % duplicates (stale samples) and glitches; medians over repeats. The
baseline is one multiply-add per sample (the runbook's "one multiply and one add"): the ratio
says what validation, the trend, hysteresis and the dominant-resource choice cost on top.
The Guard's added cost with the redline on is not measured: the core does not act on the
redline yet.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from rvguard.enforce.redline import HeadroomSample, Redline, RedlineConfig, ResourceLimit

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=100_000)
    args = parser.parse_args()
    samples = signal(args.samples)
    base, redline = per_sample(run_ewma, samples), per_sample(run_redline, samples)
    print(f"samples {args.samples}, medians of {REPEATS}")
    print(f"  bare EWMA update      {base * 1e9:8.0f} ns/sample")
    print(f"  Redline.observe       {redline * 1e9:8.0f} ns/sample   ({redline / base:.1f}x the bare EWMA)")


if __name__ == "__main__":
    main()
