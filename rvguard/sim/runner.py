"""Run an experiment's arms over reps: the one loop behind every experiment.

Why one runner: every experiment varies some of the contract (a deadline, a
floor, the excess policy, the credit meter), the policy (guarded, gated
FIFO, a baseline), the learner, the backend (a batch cap, a profile), the
watch and the arrival stream. An `Arm` carries all of those; `run_arms`
keeps the paired design (rep ``r``'s arrivals are drawn once per distinct
load and replayed by every arm that shares it, with the run seed
``seed·1000 + r``) and reduces each run to a `RunRecord`
(`rvguard.sim.record`), pooled into one `Condition` per arm.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import progress
from ..columnar import ColumnarTrace
from ..contract import Contract
from ..enforce.request import Request
from ..events import Arrive, Complete, Dispatch, Event
from ..monitors.phase import phase_sweep
from .backend import ServiceModel
from .loads import marquee_arrivals
from .record import Condition, RunRecord, record_run
from .run import run_once

__all__ = [
    "Arm",
    "Arrivals",
    "Runner",
    "default_arrivals",
    "mean_assured_service",
    "run_arms",
    "with_floored",
    "with_tenant",
]

PHASE_STEPS = 8


@dataclass(frozen=True)
class Arm:
    """One condition of an experiment.

    Attributes:
        params: what the experiment varies (reported as ``params``).
        contract: the contract this arm runs and is judged against.
        run: keyword arguments of `run_once` (mode, learner, model, watch, …).
        load: the arrival stream: keyword overrides of the marquee load, or
            whatever a custom `Arrivals` function reads.
        phase: also run the phase sweep on each trace.
    """

    params: dict[str, Any]
    contract: Contract
    run: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)
    phase: bool = False


Arrivals = Callable[[Arm, int, int], list[Request]]  # (arm, seed, rep) → arrivals
Runner = Callable[..., list[Condition]]  # run_arms, or rvguard.study.live.LiveRunner


def default_arrivals(arm: Arm, seed: int, rep: int) -> list[Request]:
    """The marquee load with the arm's overrides (`rvguard.sim.loads.marquee_arrivals`)."""
    return marquee_arrivals(arm.contract, seed, rep, **arm.load)


def with_tenant(contract: Contract, tenant: str = "assured", **update: Any) -> Contract:
    """``contract`` with one tenant's fields replaced (e.g. ``floor=8`` or ``deadline=1.0``)."""
    changed = contract.tenants[tenant].model_copy(update=update)
    return contract.model_copy(update={"tenants": {**contract.tenants, tenant: changed}})


def with_floored(contract: Contract, **update: Any) -> Contract:
    """``contract`` with the same fields replaced in *every* floored tenant (the sweeps' rule).

    On the marquee that is its one ``assured`` tenant; with several floored
    tenants a sweep moves their floors (or deadlines) together.
    """
    tenants = {n: t.model_copy(update=update) if t.floored else t for n, t in contract.tenants.items()}
    return contract.model_copy(update={"tenants": tenants})


def mean_assured_service(events: Sequence[Event], contract: Contract) -> float | None:
    """Mean observed service (complete − dispatch) of the floored tenants' requests."""
    floored = set(contract.floored_tenants)
    tenant: dict[str, bool] = {}
    start: dict[str, float] = {}
    services: list[float] = []
    for ev in events:
        if isinstance(ev, Arrive):
            tenant[ev.rid] = ev.tenant in floored
        elif isinstance(ev, Dispatch) and tenant.get(ev.rid):
            start[ev.rid] = ev.t
        elif isinstance(ev, Complete) and ev.rid in start:
            services.append(ev.t - start.pop(ev.rid))
    return statistics.fmean(services) if services else None


def _load_key(arm: Arm) -> Hashable:
    return tuple(sorted((k, repr(v)) for k, v in arm.load.items()))


def _one(arm: Arm, arrivals: list[Request], seed: int, model: ServiceModel | None) -> RunRecord:
    """One run of ``arm``, reduced to its record (with the phase sweep when the arm asks)."""
    kwargs = arm.run if model is None or "model" in arm.run else {**arm.run, "model": model}
    out = run_once(arm.contract, arrivals, seed=seed, **kwargs)
    worst = None
    if arm.phase:
        sweep = phase_sweep(ColumnarTrace.from_events(out.result.events), arm.contract, PHASE_STEPS)
        worst = sweep.worst_attainment
    return record_run(arm.contract, out.result.events, out.metrics, out.violations, phase_worst=worst)


def run_arms(
    arms: Sequence[Arm],
    *,
    reps: int,
    seed: int,
    arrivals: Arrivals | None = None,
    model: ServiceModel | None = None,
) -> list[Condition]:
    """Every arm over ``reps`` paired reps; one pooled `Condition` each (module doc).

    ``model`` is the backend of every arm that does not set its own (``--profile``).
    """
    draw = arrivals or default_arrivals
    records: list[list[Any]] = [[] for _ in arms]
    with progress.task("runs", total=reps * len(arms), unit="run") as advance:
        for rep in range(reps):
            cache: dict[Hashable, list[Request]] = {}
            for arm, acc in zip(arms, records, strict=True):
                key = _load_key(arm)
                if key not in cache:
                    cache[key] = draw(arm, seed, rep)
                acc.append(_one(arm, cache[key], seed * 1000 + rep, model))
                advance(1)
    return [
        Condition(arm.params, tuple(runs), {"slots": arm.contract.slots})
        for arm, runs in zip(arms, records, strict=True)
    ]
