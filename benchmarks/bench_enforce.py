"""Enforcer cost: the decision core per request, and the Guard's throughput and added latency.

Run: ``python benchmarks/bench_enforce.py``. Medians over repeats; ratios are
printed against bare baselines measured in the same run:

* core: admit + dispatch + complete per request vs a heapq push/pop + dict
  set/delete per request (the bare anchor), and vs that baseline building the same four event
  objects the core emits (aim: the core ≤ 3× this one, on the default install, issue 30);
* Guard: requests through a zero-latency in-process dispatcher vs bare
  ``asyncio.Semaphore(C)`` + one task per request (aim ≥ 0.9×, zero latency and one yield, issue 30), 5 000
  submits at once, C = 4; the runs alternate guard / semaphore and the ratio
  is the median of the pairs' ratios, by this process's CPU time (robust on a
  shared, loaded machine) and by wall clock, after one discarded warm-up run
  of each (a process's first runs pay for growing the allocator's arenas); also with a dispatcher that
  suspends once (``await asyncio.sleep(0)``), as any real backend does. The
  zero-latency one never suspends, so an inline submit runs to its outcome
  in one step.
"""

from __future__ import annotations

import asyncio
import heapq
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import CallableDispatcher, Response
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


async def _one_yield(request: Request) -> Response:
    await asyncio.sleep(0)  # a backend that suspends once (any real one does)
    return Response()


Backend = Callable[[Request], Awaitable[Response]]


def _percentiles(lat: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(lat, n=100)
    return q[49], q[98]


async def guard_run(backend: Backend) -> list[float]:
    """N_GUARD concurrent submits through a Guard (inline dispatch); per-request latencies."""
    lat: list[float] = []

    async def one(guard: Guard, i: int) -> None:
        t0 = time.perf_counter()
        await guard.submit(Request(f"r{i}", "opp", 0.0))
        lat.append(time.perf_counter() - t0)

    async with Guard(CONTRACT, CallableDispatcher(backend)) as guard:
        await asyncio.gather(*(one(guard, i) for i in range(N_GUARD)))
    return lat


async def semaphore_run(backend: Backend) -> list[float]:
    """The baseline: ``Semaphore(C)`` and one task per request."""
    lat: list[float] = []
    sem = asyncio.Semaphore(SLOTS)

    async def one(i: int) -> None:
        t0 = time.perf_counter()
        async with sem:
            await asyncio.get_running_loop().create_task(backend(Request(f"r{i}", "opp", 0.0)))
        lat.append(time.perf_counter() - t0)

    await asyncio.gather(*(one(i) for i in range(N_GUARD)))
    return lat


@dataclass
class _Runs:
    cpu: list[float] = field(default_factory=list)  # requests per CPU-second of this process
    wall: list[float] = field(default_factory=list)  # requests per wall-clock second
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)

    def add(self, run: Callable[[], Coroutine[Any, Any, list[float]]]) -> None:
        c0, w0 = time.process_time(), time.perf_counter()
        lat = asyncio.run(run())
        self.cpu.append(N_GUARD / (time.process_time() - c0))
        self.wall.append(N_GUARD / (time.perf_counter() - w0))
        p50, p99 = _percentiles(lat)
        self.p50.append(p50)
        self.p99.append(p99)


def compare_guard(backend: Backend) -> tuple[_Runs, _Runs, float, float]:
    """Guard and semaphore runs interleaved (load drifts hit both alike); the median of the
    per-pair ratios, by CPU time and by wall clock."""
    guard, sem = _Runs(), _Runs()
    _Runs().add(lambda: guard_run(backend))  # warm-up, discarded: the first runs of a process
    _Runs().add(lambda: semaphore_run(backend))  # pay for the allocator's arenas
    for _ in range(REPEATS):
        guard.add(lambda: guard_run(backend))
        sem.add(lambda: semaphore_run(backend))
    cpu = statistics.median(g / b for g, b in zip(guard.cpu, sem.cpu, strict=True))
    wall = statistics.median(g / b for g, b in zip(guard.wall, sem.wall, strict=True))
    return guard, sem, cpu, wall


def _report_guard(name: str, backend: Backend) -> None:
    guard, sem, cpu, wall = compare_guard(backend)
    med = statistics.median
    for who, r in (("guard", guard), ("semaphore", sem)):
        print(
            f"{name} {who:9s}: {med(r.cpu):,.0f} req/CPU-s, {med(r.wall):,.0f} req/s wall"
            f"  (p50 {med(r.p50) * 1e3:.2f} ms, p99 {med(r.p99) * 1e3:.2f} ms)"
        )
    print(f"{name} ratio guard/semaphore: {cpu:.2f}x by CPU time, {wall:.2f}x by wall clock (aim >= 0.9x)")


def main() -> None:
    """Measure and print the figures recorded in docs/performance.md."""
    core = _median_per_op(core_run, N_CORE)
    base = _median_per_op(heap_baseline, N_CORE)
    events = _median_per_op(event_baseline, N_CORE)
    print(f"core admit+dispatch+complete: {core * 1e6:.2f} us/request")
    print(
        f"heapq+dict baseline:          {base * 1e6:.2f} us/request"
        f"  ratio {core / base:.1f}x (the bare anchor)"
    )
    ratio = core / events
    print(f"baseline + the 4 events:      {events * 1e6:.2f} us/request  ratio {ratio:.1f}x (aim <= 3x)")
    _report_guard("zero-latency", _zero)
    _report_guard("one-yield   ", _one_yield)


if __name__ == "__main__":
    main()
