"""One simulated run, end to end: a mode, a learner, a workload, a seed → a trace.

Why a separate module: the CLI, the experiments and the tests all ask the
same question ("run this configuration with this seed"), and they must get
the same answer. `run_once` is that one place. Modes:

* ``guarded`` — the real `DecisionCore` (priority dispatch);
* ``gated-fifo`` — the real core with ``dispatch_policy="fifo"`` (the
  reference study's ablation: the guard's admissions without priority);
* ``unguarded`` — `FifoBaseline`: the learner alone, FIFO, no floor;
* ``gaie`` / ``gaie-swapped`` — `FlowController`, correct or swapped mapping;
* ``server-priority`` — `FlowController` admitting all, correct mapping:
  vLLM's own priority scheduling, no floor;
* ``rate-limit-class`` / ``rate-limit-flat`` — `RateLimiter`: each floored
  tenant capped at its floor and the unfloored ones sharing the rest of
  the server's capacity per window, or that capacity flat, first come
  (`rate_limit_capacity`).

A user's property tables (``properties``, `rvguard.properties`) run in the real core as in the
Guard: enforced through its gate (`rvguard.enforce.gate`: an admission a table forbids is refused
``property: NAME``, a dispatch kept queued, the built-in guarantees first with a ``shield`` alert
record), or in shadow (alerts only); the simulated trace is then judged against the tables
(`RunOutcome.tables`). In the baseline modes there is no core to gate: the tables only judge.

The LSQ learner is fitted the way the reference study's was: least squares
on 132 (load, latency) samples from a closed-loop profiling run of the same
backend (`rvguard.sim.profiling`), so β scales a prediction that is roughly
right at β = 1.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..contract import Contract
from ..enforce.core import DecisionCore
from ..enforce.gate import tables_hook
from ..enforce.learners import AdmitAll, Learner, LSQLearner, RandomLearner, RejectAll
from ..enforce.request import Request
from ..enforce.watch import DEFAULT_WATCH, WatchConfig
from ..events import Event
from ..monitors import DEFAULT_PROPERTIES, Metrics, Monitor
from ..properties.report import TableReport
from ..properties.report import judge as judge_tables
from ..properties.table import PropertyTable
from ..verdict import Violation
from .backend import BackendModel, ServiceModel
from .baselines import FifoBaseline, FlowController, RateLimiter
from .engine import Policy, SimResult, Simulator
from .profiling import profile_samples

__all__ = [
    "LEARNERS",
    "MODES",
    "RunOutcome",
    "calibration_samples",
    "judge",
    "make_learner",
    "run_once",
]

MODES: tuple[str, ...] = (
    "guarded",
    "gated-fifo",
    "unguarded",
    "gaie",
    "gaie-swapped",
    "server-priority",
    "rate-limit-class",
    "rate-limit-flat",
)
LEARNERS: tuple[str, ...] = ("admit-all", "reject-all", "random", "lsq", "lsq-agnostic")


def rate_limit_capacity(contract: Contract, model: ServiceModel) -> int:
    """Requests per window a static limit would be set to: C·W over the clean batch-C service at 16 tokens."""
    service = model.mean_base(16, contract.slots) if isinstance(model, BackendModel) else 1.0
    return max(1, math.floor(contract.slots * contract.window / service))


def _rate_limiter(mode: str, contract: Contract, model: ServiceModel) -> RateLimiter:
    total = rate_limit_capacity(contract, model)
    if mode == "rate-limit-flat":
        return RateLimiter(contract, flat=total)
    floors = {n: math.floor(t.floor) for n, t in contract.tenants.items() if t.floored}
    rest = [n for n, t in contract.tenants.items() if not t.floored]
    spare = max(0, total - sum(floors.values()))
    caps = {**floors, **{n: spare // len(rest) for n in rest}}
    return RateLimiter(contract, caps=caps)


def make_policy(
    mode: str,
    contract: Contract,
    *,
    watch: WatchConfig | None = DEFAULT_WATCH,
    deferred_drop: bool = False,
    model: ServiceModel | None = None,
) -> Policy:
    """A fresh policy for ``mode`` (``watch``, ``deferred_drop``: the modes that run the real core)."""
    if mode in ("guarded", "gated-fifo"):
        order: Literal["priority", "fifo"] = "priority" if mode == "guarded" else "fifo"
        return DecisionCore(contract, dispatch_policy=order, watch=watch, deferred_drop=deferred_drop)
    if mode == "unguarded":
        return FifoBaseline(contract)
    if mode in ("gaie", "gaie-swapped", "server-priority"):
        return FlowController(contract, swap=mode == "gaie-swapped", shed=mode != "server-priority")
    if mode.startswith("rate-limit-") and mode in MODES:
        return _rate_limiter(mode, contract, model or BackendModel(slots=contract.slots))
    raise ValueError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")


_PROFILED: dict[tuple[object, int, int], tuple[tuple[float, float], ...]] = {}


def calibration_samples(
    model: ServiceModel, *, slots: int, tokens: int = 16
) -> tuple[tuple[float, float], ...]:
    """The LSQ learner's training set: closed-loop (load, latency) samples (`profiling`).

    One profiling run per backend model (models are frozen, so hashable),
    from its own seeded stream (not the run's): like the study's, one fitted
    predictor serves every run.
    """
    key = (model, slots, tokens)
    if key not in _PROFILED:
        rng = random.Random(f"profile:{slots}:{tokens}")
        _PROFILED[key] = tuple(profile_samples(model, rng, slots=slots, tokens=tokens))
    return _PROFILED[key]


def make_learner(
    name: str, contract: Contract, rng: random.Random, *, beta: float = 1.0, model: ServiceModel
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
        samples = calibration_samples(model, slots=contract.slots)
        return LSQLearner.from_contract(contract, samples, beta=beta, mode=mode)
    raise ValueError(f"unknown learner {name!r}: choose from {', '.join(LEARNERS)}")


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A run and its verdicts."""

    result: SimResult
    metrics: Metrics
    violations: tuple[Violation, ...]
    #: the user's tables' verdicts on the trace (None: no tables)
    tables: TableReport | None = None


def judge(
    contract: Contract, events: Sequence[Event], properties: Sequence[str] = DEFAULT_PROPERTIES
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
    watch: WatchConfig | None = DEFAULT_WATCH,
    deferred_drop: bool = False,
    properties: Sequence[PropertyTable] = (),
    shadow: bool = False,
) -> RunOutcome:
    """Simulate ``arrivals`` under ``mode`` and ``learner`` with ``seed``; judge the trace.

    ``watch`` configures the core's online assumption watch (on by default: its alerts join the
    trace; ``None`` turns it off) and
    ``deferred_drop`` its doom-sound drop at dispatch (guarded modes only). ``properties``: a
    user's tables, enforced in the core (``shadow``: alerts only) and judged on the trace
    (module doc).
    """
    service = model or BackendModel(slots=contract.slots)
    # A string seed (hashed by SHA-512, stable across runs) keeps this stream
    # apart from an arrival stream drawn from ``random.Random(seed)``: reusing
    # one integer seed for both correlates gaps with services (an M/M/c check
    # then shows a third too little waiting).
    rng = random.Random(f"sim:{seed}")
    learn = make_learner(learner, contract, rng, beta=beta, model=service)
    policy = make_policy(mode, contract, watch=watch, deferred_drop=deferred_drop, model=service)
    hook = tables_hook(policy, properties, watch, shadow=shadow) if isinstance(policy, DecisionCore) else None
    if hook is not None:
        hook.quiet = True  # its records are in the trace; no log line each
    through = None if hook is None else hook.through
    sim = Simulator(policy, learn, service, rng, slots=contract.slots, shield=through)
    result = sim.run(arrivals)
    metrics, violations = judge(contract, result.events)
    tables = judge_tables(contract, properties, result.events) if properties else None
    return RunOutcome(result, metrics, violations, tables)
