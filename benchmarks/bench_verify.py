"""Median time to verify one contract and to synthesize one parameter (rvguard.verify).

Run: python benchmarks/bench_verify.py   (targets: verify < 100 ms, synthesis < 1 s)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rvguard.contract import load_contract
from rvguard.verify import synthesize, verify_contract

ROOT = Path(__file__).resolve().parent.parent
REPS = 15


def median_ms(fn: Callable[[], object], reps: int = REPS) -> float:
    fn()  # warm-up: z3 import and first solver
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main() -> None:
    for spec in ("marquee.yaml", "two_tenants.yaml"):
        c = load_contract(ROOT / "specs" / spec)
        print(f"{spec:18} verify          median {median_ms(lambda c=c: verify_contract(c)):7.1f} ms")
        for p in ("floor", "deadline", "slots"):
            print(f"{spec:18} synthesize {p:8} median {median_ms(lambda c=c, p=p: synthesize(c, p)):7.1f} ms")


if __name__ == "__main__":
    main()
