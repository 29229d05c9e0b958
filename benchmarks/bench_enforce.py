"""Enforcer cost: the decision core per request, and the Guard's throughput and added latency.

Run: ``python benchmarks/bench_enforce.py``. Medians over repeats; ratios are
printed against bare baselines measured in the same run:

* core: admit + dispatch + complete per request vs a heapq push/pop + dict
  set/delete per request (target ≤ 3×); also vs a baseline that builds the
  same four event objects, to show how much is the events themselves;
* Guard: requests/s through a zero-latency in-process dispatcher vs bare
  ``asyncio.Semaphore(C)`` + one task per request (target ≥ 0.5×), and the
  p50/p99 per-request latency each adds.
"""

from __future__ import annotations

import asyncio
import heapq
import statistics
import time
from collections.abc import Callable

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatch import CallableDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.request import Request
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Proposal

N_CORE = 20_000
N_GUARD = 5_000
REPEATS = 7
SLOTS = 4

CONTRACT = Contract.model_validate(
    {
        "window": 1.0,
        "slots": SLOTS,
        "service": {"s_max": 0.66},
        "tenants": {
            "assured": {"floor": 6, "deadline": 1.82, "tier": 0},
            "opp": {"deadline": 1.82, "tier": 1},
        },
    }
)
YES = Proposal()


def _median_per_op(fn: Callable[[], None], n: int) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def core_run() -> None:
    core = DecisionCore(CONTRACT)
    reqs = [Request(f"r{i}", "opp", i * 1e-3) for i in range(N_CORE)]
    for r in reqs:
        core.arrive(r, YES, r.t)
        core.finish(r.rid, r.t)


def heap_baseline() -> None:
    heap: list[tuple[int, int, str]] = []
    live: dict[str, int] = {}
    for i in range(N_CORE):
        rid = f"r{i}"
        live[rid] = i
        heapq.heappush(heap, (i % 2, i, rid))
        heapq.heappop(heap)
        del live[rid]


def event_baseline() -> None:
    heap: list[tuple[int, int, str]] = []
    live: dict[str, int] = {}
    for i in range(N_CORE):
        rid, t = f"r{i}", i * 1e-3
        live[rid] = i
        Arrive(t, rid, "opp", t + 1.0, None, 48, YES)
        Admit(t, rid, Basis.SURPLUS)
        heapq.heappush(heap, (i % 2, i, rid))
        heapq.heappop(heap)
        Dispatch(t, rid)
        Complete(t, rid)
        del live[rid]


async def _zero(request: Request) -> Response:
    return Response()


def _percentiles(lat: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(lat, n=100)
    return q[49], q[98]


async def guard_run() -> tuple[float, list[float]]:
    lat: list[float] = []

    async def one(guard: Guard, i: int) -> None:
        t0 = time.perf_counter()
        await guard.submit(Request(f"r{i}", "opp", 0.0))
        lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    async with Guard(CONTRACT, CallableDispatcher(_zero)) as guard:
        await asyncio.gather(*(one(guard, i) for i in range(N_GUARD)))
    return N_GUARD / (time.perf_counter() - t0), lat


async def semaphore_run() -> tuple[float, list[float]]:
    lat: list[float] = []
    sem = asyncio.Semaphore(SLOTS)

    async def one(i: int) -> None:
        t0 = time.perf_counter()
        async with sem:
            await asyncio.get_running_loop().create_task(_zero(Request(f"r{i}", "opp", 0.0)))
        lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(N_GUARD)))
    return N_GUARD / (time.perf_counter() - t0), lat


def _guard_medians(
    fn: Callable[[], asyncio.Future[tuple[float, list[float]]]],
) -> tuple[float, float, float]:
    rates, p50s, p99s = [], [], []
    for _ in range(REPEATS):
        rate, lat = asyncio.run(fn())  # type: ignore[arg-type]
        p50, p99 = _percentiles(lat)
        rates.append(rate)
        p50s.append(p50)
        p99s.append(p99)
    return statistics.median(rates), statistics.median(p50s), statistics.median(p99s)


def main() -> None:
    """Measure and print the figures recorded in docs/performance.md."""
    core = _median_per_op(core_run, N_CORE)
    base = _median_per_op(heap_baseline, N_CORE)
    events = _median_per_op(event_baseline, N_CORE)
    print(f"core admit+dispatch+complete: {core * 1e6:.2f} us/request")
    print(
        f"heapq+dict baseline:          {base * 1e6:.2f} us/request  ratio {core / base:.1f}x (target <= 3x)"
    )
    print(f"baseline + the 4 events:      {events * 1e6:.2f} us/request  ratio {core / events:.1f}x")
    g_rate, g50, g99 = _guard_medians(guard_run)  # type: ignore[arg-type]
    s_rate, s50, s99 = _guard_medians(semaphore_run)  # type: ignore[arg-type]
    print(f"guard throughput:     {g_rate:,.0f} req/s  (p50 {g50 * 1e3:.2f} ms, p99 {g99 * 1e3:.2f} ms)")
    print(f"semaphore throughput: {s_rate:,.0f} req/s  (p50 {s50 * 1e3:.2f} ms, p99 {s99 * 1e3:.2f} ms)")
    print(f"throughput ratio guard/semaphore: {g_rate / s_rate:.2f}x (target >= 0.5x)")
    print(f"added latency per request: p50 {(g50 - s50) * 1e3:+.2f} ms, p99 {(g99 - s99) * 1e3:+.2f} ms")


if __name__ == "__main__":
    main()
