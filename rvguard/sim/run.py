"""One simulated run, end to end: a mode, a learner, a workload, a seed → a trace.

Why a separate module: the CLI, the experiments and the tests all ask the
same question ("run this configuration with this seed"), and they must get
the same answer. `run_once` is that one place. Modes:

* ``guarded`` — the real `DecisionCore` (priority dispatch);
* ``gated-fifo`` — the real core with ``dispatch_policy="fifo"`` (the
  reference study's ablation: the guard's admissions without priority);
* ``unguarded`` — `FifoBaseline`: the learner alone, FIFO, no floor;
* ``gaie`` / ``gaie-swapped`` — `FlowController`, correct or swapped mapping.

The LSQ learner is calibrated the way the reference study's was, and with
its flaw: on (load, *service*) samples taken at light load, so it learns the
batching slope but not the queueing delay, and under a flood it predicts
latencies far below the deadline whatever β ≤ 2 does to them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..contract import Contract
from ..enforce.core import DecisionCore
from ..enforce.learners import AdmitAll, Learner, LSQLearner, RandomLearner, RejectAll
from ..enforce.request import Request
from ..enforce.watch import WatchConfig
from ..events import Event
from ..monitors import Metrics, Monitor
from ..verdict import Violation
from .backend import BackendModel, ServiceModel
from .baselines import FifoBaseline, FlowController
from .engine import Policy, SimResult, Simulator

__all__ = [
    "LEARNERS",
    "MODES",
    "Mode",
    "RunOutcome",
    "calibration_samples",
    "judge",
    "make_learner",
    "run_once",
]

Mode = Literal["guarded", "gated-fifo", "unguarded", "gaie", "gaie-swapped"]
MODES: tuple[str, ...] = ("guarded", "gated-fifo", "unguarded", "gaie", "gaie-swapped")
LEARNERS: tuple[str, ...] = ("admit-all", "reject-all", "random", "lsq", "lsq-agnostic")


def make_policy(mode: str, contract: Contract, *, watch: WatchConfig | None = None) -> Policy:
    """A fresh policy for ``mode`` (``watch`` applies to the two modes that run the real core)."""
    if mode == "guarded":
        return DecisionCore(contract, watch=watch)
    if mode == "gated-fifo":
        return DecisionCore(contract, dispatch_policy="fifo", watch=watch)
    if mode == "unguarded":
        return FifoBaseline(contract)
    if mode in ("gaie", "gaie-swapped"):
        return FlowController(contract, swap=mode == "gaie-swapped")
    raise ValueError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")


def calibration_samples(
    model: BackendModel, rng: random.Random, *, tokens: int = 16, per_load: int = 4
) -> list[tuple[float, float]]:
    """(load, service) pairs at loads 1 … 2C: what a light-load profiling run records.

    Why service and not sojourn: that is what a profiling run of the server
    measures; beyond C the extra load waits in a queue the samples never see.
    """
    out: list[tuple[float, float]] = []
    for load in range(1, 2 * model.slots + 1):
        n = min(load, model.slots)
        out.extend((float(load), model.draw(tokens, n, rng)) for _ in range(per_load))
    return out


def make_learner(
    name: str, contract: Contract, rng: random.Random, *, beta: float = 1.0, model: BackendModel
) -> Learner:
    """The learner called ``name`` (see `LEARNERS`), drawing only on ``rng``."""
    if name == "admit-all":
        return AdmitAll()
    if name == "reject-all":
        return RejectAll()
    if name == "random":
        return RandomLearner(rng, objectives=tuple(contract.tenants))
    if name in ("lsq", "lsq-agnostic"):
        mode: Literal["sheddable-only", "class-agnostic"] = (
            "class-agnostic" if name == "lsq-agnostic" else "sheddable-only"
        )
        samples = calibration_samples(model, rng)
        return LSQLearner.from_contract(contract, samples, beta=beta, mode=mode)
    raise ValueError(f"unknown learner {name!r}: choose from {', '.join(LEARNERS)}")


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A run and its verdicts."""

    result: SimResult
    metrics: Metrics
    violations: tuple[Violation, ...]


def judge(
    contract: Contract, events: Sequence[Event], properties: Sequence[str] = ("AF", "SF", "DR", "WF")
) -> tuple[Metrics, tuple[Violation, ...]]:
    """Feed a trace to the online `Monitor`; its metrics and violations."""
    mon = Monitor(contract, properties)
    for ev in events:
        mon.feed(ev)
    return mon.summary(), tuple(mon.violations())


def run_once(
    contract: Contract,
    arrivals: Sequence[Request],
    *,
    mode: str = "guarded",
    learner: str = "admit-all",
    beta: float = 1.0,
    seed: int = 0,
    model: ServiceModel | None = None,
    watch: WatchConfig | None = None,
) -> RunOutcome:
    """Simulate ``arrivals`` under ``mode`` and ``learner`` with ``seed``; judge the trace.

    ``watch`` turns on the core's online assumption watch (guarded modes only).
    """
    service = model or BackendModel(slots=contract.slots)
    # A string seed (hashed by SHA-512, stable across runs) keeps this stream
    # apart from an arrival stream drawn from ``random.Random(seed)``: reusing
    # one integer seed for both correlates gaps with services (an M/M/c check
    # then shows a third too little waiting).
    rng = random.Random(f"sim:{seed}")
    calib = service if isinstance(service, BackendModel) else BackendModel(slots=contract.slots)
    learn = make_learner(learner, contract, rng, beta=beta, model=calib)
    sim = Simulator(make_policy(mode, contract, watch=watch), learn, service, rng, slots=contract.slots)
    result = sim.run(arrivals)
    metrics, violations = judge(contract, result.events)
    return RunOutcome(result, metrics, violations)
