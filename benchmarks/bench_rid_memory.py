"""Memory a finished rid costs the monitor when WF has no horizon (`rvguard check`).

Run: python benchmarks/bench_rid_memory.py [--requests N]

`rvguard check` remembers every finished rid (``retain_finished=None``) so that a
rid reused anywhere in the file is caught. This feeds N arrive/reject pairs to a
monitor that remembers every rid and to one that remembers none (the baseline,
same run) and prints the difference per rid, measured with tracemalloc, for a
short rid and for a UUID.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

from rvguard.contract import load_contract
from rvguard.events import Arrive, Reject
from rvguard.monitors import Monitor

CONTRACT = load_contract(Path(__file__).resolve().parent.parent / "specs" / "marquee.yaml")
RIDS: dict[str, Callable[[int], str]] = {
    "short (r123456)": lambda i: f"r{i}",
    "UUID (36 chars)": lambda i: str(uuid.UUID(int=i + 12_345_678_901_234_567_890)),
}


def bytes_per_request(retain: int | None, rid: Callable[[int], str], n: int) -> float:
    """Memory the monitor holds after n finished requests, per request."""
    gc.collect()
    tracemalloc.start()
    monitor = Monitor(CONTRACT, retain_finished=retain)
    base = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        r = rid(i)
        monitor.feed(Arrive(i * 1e-3, r, "opportunistic"))
        monitor.feed(Reject(i * 1e-3, r, "learner"))
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert monitor.statistics().retained_finished == (n if retain is None else 0)
    return held / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()
    for name, rid in RIDS.items():
        every = bytes_per_request(None, rid, args.requests)
        none = bytes_per_request(0, rid, args.requests)
        print(f"{name:18} {every - none:6.0f} B per distinct rid (all {every:.0f}, none {none:.0f})")


if __name__ == "__main__":
    main()
