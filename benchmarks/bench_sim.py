"""Simulator throughput: simulated requests per second against ciw, same M/G/c priority model.

Run: ``python benchmarks/bench_sim.py``. Model: Poisson arrivals at λ = 3/s in
two classes (1.5/s each), lognormal service with mean 1 s (log-space
σ = 0.8), C = 4 servers, non-preemptive priority (class 0 first), over
``HORIZON`` simulated seconds (≈ 3 × HORIZON requests). Both sides generate
their own arrivals inside the timed region. Ours is measured two ways:

* ``sim`` — `Simulator` driving the real `DecisionCore` (admission,
  entitlement, the per-request automaton, events) and the backend;
* ``sim+judge`` — `run_once`: the same plus the online `Monitor` judging
  AF/SF/DR/WF on the trace (what every experiment run pays).

Medians over ``REPEATS`` runs; the ratio to ciw is printed (target ≥ 1.5×, issue 16: the
earlier 10× is retired, no Python design driving the real core reaches it).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import ciw

sys.path.append(str(Path(__file__).resolve().parents[1]))  # after PYTHONPATH: a compiled build there wins

from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.learners import AdmitAll
from rvguard.enforce.request import Request
from rvguard.sim.backend import LognormalService
from rvguard.sim.engine import Simulator
from rvguard.sim.run import run_once
from rvguard.sim.workloads import merge_streams

LAM, C, HORIZON, REPEATS = 3.0, 4, 3000.0, 5
SIGMA = 0.8
MU_LOG = -(SIGMA**2) / 2
CLASSES = ("c0", "c1")
CONTRACT: Contract = contract_from_mapping(
    {
        "window": 1.0,
        "slots": C,
        "service": {"s_max": 1e6, "s_max_opp": 1e6, "lower": 0.0},
        "tenants": {n: {"floor": 0, "deadline": 1e6, "tier": i} for i, n in enumerate(CLASSES)},
    }
)
MODEL = LognormalService(MU_LOG, SIGMA)


def _arrivals(seed: int) -> list[Request]:
    rng = random.Random(seed)
    streams = []
    for name in CLASSES:
        times, t = [], rng.expovariate(LAM / 2)
        while t < HORIZON:
            times.append(t)
            t += rng.expovariate(LAM / 2)
        streams.append((name, times))
    return merge_streams(streams, CONTRACT)


def ours_sim(seed: int) -> int:
    """Arrivals + `Simulator` over the real core; returns requests simulated."""
    arrivals = _arrivals(seed)
    rng = random.Random(f"sim:{seed}")
    Simulator(DecisionCore(CONTRACT), AdmitAll(), MODEL, rng, slots=C).run(arrivals)
    return len(arrivals)


def ours_judged(seed: int) -> int:
    """Arrivals + `run_once` (simulate and judge)."""
    arrivals = _arrivals(seed)
    run_once(CONTRACT, arrivals, model=MODEL, seed=seed)
    return len(arrivals)


def theirs(seed: int) -> int:
    """ciw on the same model; returns requests that arrived."""
    ciw.seed(seed)
    net = ciw.create_network(
        arrival_distributions={n: [ciw.dists.Exponential(LAM / 2)] for n in CLASSES},
        service_distributions={n: [ciw.dists.Lognormal(MU_LOG, SIGMA)] for n in CLASSES},
        number_of_servers=[C],
        priority_classes={n: i for i, n in enumerate(CLASSES)},
    )
    sim = ciw.Simulation(net)
    sim.simulate_until_max_time(HORIZON)
    return len(sim.get_all_records()) + sum(len(n.all_individuals) for n in sim.nodes[1:-1])


def rate(fn: Callable[[int], int]) -> float:
    """Median requests per second over ``REPEATS`` seeds."""
    rates = []
    for seed in range(REPEATS):
        t0 = time.perf_counter()
        n = fn(seed)
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def main() -> None:
    """Measure and print the table."""
    ciw_rate = rate(theirs)
    sim_rate = rate(ours_sim)
    judged_rate = rate(ours_judged)
    print(f"M/G/{C} priority, λ={LAM}/s, lognormal σ={SIGMA}, {HORIZON:.0f} s, median of {REPEATS}")
    print(f"  ciw            {ciw_rate:>10,.0f} req/s")
    print(f"  sim            {sim_rate:>10,.0f} req/s   {sim_rate / ciw_rate:5.1f}× ciw")
    print(f"  sim+judge      {judged_rate:>10,.0f} req/s   {judged_rate / ciw_rate:5.1f}× ciw")


if __name__ == "__main__":
    main()
