"""Run an experiment's arms over reps: the shared loop behind every experiment but the first two.

Why a second runner: `experiments._run_cells` varies only the policy and
the learner under one contract. The stress, fault and replay experiments
vary the contract itself (a deadline, a floor, the excess policy), the
backend (a batch cap), the watch, and the arrival stream. An `Arm` carries
all of those; `run_arms` keeps the paired design (rep ``r``'s arrivals are
drawn once per distinct load and replayed by every arm that shares it, with
the run seed ``seed·1000 + r``), and pools each arm's counts over reps.

Besides the miss counts, each arm reports *extras* pooled over reps: floor
attainment (Σ entitled attained / Σ entitled, against the contract), SF
violations, the effective assured utilisation ρ_eff = (B/W)·s̄_a/C (s̄_a the
mean observed assured service of the run) and, for arms that ask, the
phase sweep's worst attainment.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import progress
from ..contract import Contract
from ..enforce.request import Request
from ..events import Arrive, Complete, Dispatch, Event, Reject
from ..io.columnar import ColumnarTrace
from ..monitors.phase import phase_sweep
from .experiments import Condition, marquee_arrivals
from .run import RunOutcome, run_once

__all__ = ["Arm", "Arrivals", "mean_assured_service", "run_arms", "with_floored", "with_tenant"]

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


def _marquee(arm: Arm, seed: int, rep: int) -> list[Request]:
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


def _rho_eff(contract: Contract, events: Sequence[Event]) -> float | None:
    s = mean_assured_service(events, contract)
    if s is None:
        return None
    demand = sum(t.floor for t in contract.floored_tenants.values()) / contract.window
    return demand * s / contract.slots


@dataclass
class _Acc:
    missed: list[int] = field(default_factory=list)
    judged: list[int] = field(default_factory=list)
    violations: list[int] = field(default_factory=list)
    af: list[int] = field(default_factory=list)
    sf: int = 0
    entitled: int = 0
    attained: int = 0
    lowered: int = 0
    rho: list[float] = field(default_factory=list)
    worst_phase: list[float] = field(default_factory=list)

    def add(self, arm: Arm, out: RunOutcome) -> None:
        m = out.metrics
        self.missed.append(m.admitted_missed)
        self.judged.append(m.admitted_judged)
        self.violations.append(sum(1 for v in out.violations if v.property in ("AF", "DR", "WF")))
        self.af.append(sum(1 for v in out.violations if v.property == "AF"))
        self.sf += sum(1 for v in out.violations if v.property == "SF")
        self.entitled += m.entitled
        self.attained += m.entitled_attained
        events = out.result.events
        self.lowered += sum(1 for ev in events if isinstance(ev, Reject) and ev.reason == "floor-lowered")
        rho = _rho_eff(arm.contract, events)
        if rho is not None:
            self.rho.append(rho)
        if arm.phase:
            sweep = phase_sweep(ColumnarTrace.from_events(events), arm.contract, PHASE_STEPS)
            if sweep.worst_attainment is not None:
                self.worst_phase.append(sweep.worst_attainment)

    def extras(self, arm: Arm) -> dict[str, Any]:
        out: dict[str, Any] = {
            "floor_attainment": None if self.entitled == 0 else self.attained / self.entitled,
            "entitled": self.entitled,
            "sf_violations": self.sf,
            "rho_eff": statistics.fmean(self.rho) if self.rho else None,
        }
        if self.lowered:
            out["floor_lowered_rejects"] = self.lowered
        if arm.phase:
            out["phase_worst_attainment"] = min(self.worst_phase) if self.worst_phase else None
        return out


def _load_key(arm: Arm) -> Hashable:
    return tuple(sorted((k, repr(v)) for k, v in arm.load.items()))


def run_arms(
    arms: Sequence[Arm], *, reps: int, seed: int, arrivals: Arrivals | None = None
) -> list[Condition]:
    """Every arm over ``reps`` paired reps; one pooled `Condition` each (module doc)."""
    draw = arrivals or _marquee
    accs = [_Acc() for _ in arms]
    with progress.task("runs", total=reps * len(arms), unit="run") as advance:
        for rep in range(reps):
            cache: dict[Hashable, list[Request]] = {}
            for arm, acc in zip(arms, accs, strict=True):
                key = _load_key(arm)
                if key not in cache:
                    cache[key] = draw(arm, seed, rep)
                acc.add(arm, run_once(arm.contract, cache[key], seed=seed * 1000 + rep, **arm.run))
                advance(1)
    return [
        Condition(
            arm.params, tuple(a.missed), tuple(a.judged), tuple(a.violations), a.extras(arm), tuple(a.af)
        )
        for arm, a in zip(arms, accs, strict=True)
    ]
