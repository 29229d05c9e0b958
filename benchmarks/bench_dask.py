"""A partitioned trace checked on Dask: events/s against workers, and a large corpus end to end.

Run: ``python benchmarks/bench_dask.py [--events N] [--partitions P] [--workers 1,2]
[--repeats R] [--large M]``. A seeded synthetic guarded trace (Poisson arrivals, an assured
tenant with floor 6 per 1 s window and an opportunistic one; the first six assured arrivals of a
window admitted on the floor, the rest rejected; ~0.1 % of services long enough to miss the
deadline, so SF reports violations) is written as P Parquet partitions cut by time. In the same
run it is checked by the single-process streaming check (``rvguard check DIR``) and by
``--workers N`` for each N (a LocalCluster of N single-threaded worker processes, its start
included: the command's own cost, and without it), with the worker processes' CPU time; medians
of R runs, wall time (the point is parallelism), and each run's report must equal the
single-process one. ``--large M`` then writes an M-event
corpus and checks it with the largest N only, reporting the time, events/s and the peak
resident memory of each worker process (``ru_maxrss``) and of the client.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rvguard.check import check_trace
from rvguard.check_parallel import check_partitioned
from rvguard.contract import Contract, contract_from_mapping

SEED = 16
RATE = 100.0  # arrivals per second of trace time
KINDS = ["arrive", "admit", "reject", "dispatch", "complete"]
CONTRACT = contract_from_mapping(
    {
        "epoch": 0.0,
        "window": 1.0,
        "slots": 64,
        "output_cap": 48,
        "service": {"s_max": 0.66, "s_max_opp": 0.66, "lower": 0.05},
        "tenants": {
            "assured": {"floor": 6, "deadline": 1.82, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 1.82, "tier": 1},
        },
    }
)


def _requests(rng: np.random.Generator, first: int, n: int, t0: float) -> dict[str, Any]:
    """n requests from id ``first``, arriving after ``t0``: their times and decisions."""
    arrive = t0 + np.cumsum(rng.exponential(1.0 / RATE, n))
    assured = rng.random(n) < 0.5
    window = np.floor(arrive).astype(np.int64)
    # rank among the assured arrivals of the window (arrivals are in time order)
    key = np.where(assured, window, -1)
    start = np.r_[True, key[1:] != key[:-1]]
    rank = np.arange(n) - np.maximum.accumulate(np.where(start, np.arange(n), 0)) + 1
    rejected = assured & (rank > 6)
    dispatch = arrive + rng.uniform(0.0, 0.05, n)
    service = 0.1 + rng.exponential(0.1, n)
    service[rng.random(n) < 0.001] = 2.0  # a deadline miss now and then
    return {
        "id": np.arange(first, first + n),
        "arrive": arrive,
        "assured": assured,
        "rejected": rejected,
        "dispatch": dispatch,
        "complete": dispatch + service,
    }


def _events(r: dict[str, Any]) -> dict[str, np.ndarray]:
    """The requests' events, request by request, in lifecycle order (columns)."""
    n = r["id"].size
    rej = r["rejected"]
    t = np.stack([r["arrive"], r["arrive"], r["dispatch"], r["complete"]], axis=1)
    kind = np.tile(np.array([0, 1, 3, 4]), (n, 1))
    kind[rej, 1] = 2
    keep = np.ones((n, 4), dtype=bool)
    keep[rej, 2:] = False
    rid = np.repeat(r["id"], 4).reshape(n, 4)
    tenant = np.full((n, 4), -1)
    tenant[:, 0] = np.where(r["assured"], 0, 1)
    basis = np.full((n, 4), -1)
    basis[:, 1] = np.where(rej, -1, np.where(r["assured"], 0, 1))
    cols = {"t": t, "kind": kind, "rid": rid, "tenant": tenant, "basis": basis}
    return {k: v[keep] for k, v in cols.items()}


def _table(ev: dict[str, np.ndarray]) -> pa.Table:
    def text(codes: np.ndarray, names: list[str]) -> pa.Array:
        arr = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), pa.array(names))
        return pc.cast(arr, pa.string())

    return pa.table(
        {
            "t": pa.array(ev["t"]),
            "kind": text(ev["kind"], KINDS),
            "rid": pc.cast(pa.array(ev["rid"]), pa.string()),
            "tenant": text(ev["tenant"], ["assured", "opportunistic"]),
            "basis": text(ev["basis"], ["floor", "surplus"]),
            "reason": text(np.where(ev["kind"] == 2, 0, -1), ["excess"]),
        }
    )


def write_corpus(root: Path, events: int, partitions: int) -> int:
    """About ``events`` events in ``partitions`` time slices; returns the events written."""
    rng = np.random.default_rng(SEED)
    per_part = max(1, round(events / 3.9 / partitions))  # ~3.9 events a request (some rejected)
    carried: dict[str, np.ndarray] | None = None
    written, t0 = 0, 0.0
    for p in range(partitions):
        req = _requests(rng, p * per_part, per_part, t0)
        t0 = float(req["arrive"][-1])
        ev = _events(req)
        if carried is not None:
            ev = {k: np.concatenate((carried[k], ev[k])) for k in ev}
        order = np.argsort(ev["t"], kind="stable")
        ev = {k: v[order] for k, v in ev.items()}
        now = ev["t"] <= t0 if p < partitions - 1 else np.ones(ev["t"].size, dtype=bool)
        carried = {k: v[~now] for k, v in ev.items()}
        part = root / f"hour={p}"
        part.mkdir(parents=True)
        pq.write_table(_table({k: v[now] for k, v in ev.items()}), part / "part.parquet")
        written += int(now.sum())
    return written


def _plain(report: Any) -> dict[str, Any]:
    d: dict[str, Any] = report.to_dict()
    del d["trace"], d["seconds"]
    return d


def timed(fn: Any, repeats: int) -> tuple[float, Any]:
    """Median wall seconds of ``fn()`` over ``repeats`` runs, and its last result."""
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def _cpu() -> float:
    return time.process_time()


def _parallel(root: Path, workers: int, contract: Contract) -> tuple[float, float, float, Any]:
    """One ``--workers`` run: (seconds with the cluster's start, without it, workers' CPU s, report)."""
    import distributed

    started = time.perf_counter()
    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        before = sum(client.run(_cpu).values())
        t = time.perf_counter()
        report = check_partitioned(str(root), contract, scheduler=cluster.scheduler_address)
        checked = time.perf_counter() - t
        cpu = sum(client.run(_cpu).values()) - before
    return time.perf_counter() - started, checked, cpu, report


def scaling(root: Path, n: int, workers: list[int], repeats: int, contract: Contract) -> None:
    """Single process, then each worker count: medians of wall time; the reports must agree."""
    single, reference = timed(lambda: check_trace(str(root), contract), repeats)
    print(f"  single process (streaming)   {single:7.2f} s   {n / single / 1e3:7.1f} k ev/s   1.00x")
    # worker counts interleaved run by run, so that each meets the shared machine's load alike
    runs: dict[int, list[tuple[float, float, float, Any]]] = {w: [] for w in workers}
    for _ in range(repeats):
        for w in workers:
            runs[w].append(_parallel(root, w, contract))
            assert _plain(runs[w][-1][3]) == _plain(reference), "the Dask report differs"
    for w in workers:
        total, checked, cpu = (statistics.median(r[i] for r in runs[w]) for i in range(3))
        print(
            f"  --workers {w}  {total:7.2f} s   {n / total / 1e3:7.1f} k ev/s  {single / total:5.2f}x"
            f"   (without the cluster's start {checked:6.2f} s, {single / checked:5.2f}x;"
            f" workers' CPU {cpu:6.2f} s, {cpu / n * 1e6:4.2f} µs/event)"
        )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def large(n: int, partitions: int, workers: int) -> None:
    import distributed

    with tempfile.TemporaryDirectory(dir=".") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        written = write_corpus(root, n, partitions)
        size = sum(f.stat().st_size for f in root.rglob("*.parquet"))
        print(f"  corpus: {written:,} events in {partitions} partitions, {size / 1e9:.2f} GB, "
              f"written in {time.perf_counter() - t:.0f} s")  # fmt: skip
        with (
            distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            t = time.perf_counter()
            report = check_partitioned(str(root), CONTRACT, scheduler=cluster.scheduler_address)
            took = time.perf_counter() - t
            peaks = client.run(_peak_rss_mb)
        m = report.metrics
        rate = written / took / 1e3
        found = f"{len(report.violations)} violations, {m.requests:,} requests, {m.open_requests} open"
        print(f"  --workers {workers}: {took:.0f} s, {rate:.1f} k events/s; {found}")
        per_worker = ", ".join(f"{v:.0f} MB" for v in peaks.values())
        print(f"  peak RSS per worker: {per_worker}; client {_peak_rss_mb():.0f} MB")
        shutil.rmtree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=float, default=2e5)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--large", type=float, default=0, help="then an M-event corpus on the most workers")
    parser.add_argument("--large-partitions", type=int, default=64)
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = write_corpus(root, int(args.events), args.partitions)
        print(f"{n:,} events in {args.partitions} partitions; medians of {args.repeats}, wall time")
        scaling(root, n, workers, args.repeats, CONTRACT)
    if args.large:
        large(int(args.large), args.large_partitions, max(workers))


if __name__ == "__main__":
    main()
