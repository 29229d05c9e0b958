"""What one run of one experiment arm measured, and a condition's figures pooled over its runs.

Why one record for every experiment: the reference study reports the same
handful of figures throughout (Table 1's three denominators, ρ_eff, the
service envelope, Q_A), and a reviewer compares them across experiments. So
each run is reduced once, from its trace and the monitors' verdicts, to a
`RunRecord`; a `Condition` pools records over reps and gives every fraction
with a run-clustered interval (`rvguard.sim.stats.pooled_interval`: the run
is the replication unit).

Denominators (DESIGN §3): ``assured_miss`` is the miss fraction of
*admitted* assured requests (the study's admitted basis); ``offered_unmet``
of *offered* assured requests (rejected, dropped, failed or late);
``floor_attainment`` of the floor-entitled ones (admitted and on time).
``rho_eff`` is the study's operating fraction: the admitted assured rate ×
their mean measured service / C (``rho_total`` counts every tenant).

Cost: O(events) per run; memory O(requests of the run).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..attribution import Attribution
from ..contract import Contract
from ..events import Admit, Arrive, Complete, Dispatch, Drop, Event, Reject
from ..monitors import Metrics
from ..verdict import Violation
from .stats import pooled_interval

__all__ = ["Condition", "RunRecord", "breaks_seen", "record_run"]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run's counts (assured = the floored tenants' requests)."""

    missed: int = 0
    judged: int = 0
    unmet: int = 0
    offered: int = 0
    attained: int = 0
    entitled: int = 0
    admitted: int = 0
    rejected: int = 0
    opp_missed: int = 0
    opp_judged: int = 0
    span: float = 0.0
    service_sum: float = 0.0
    service_n: int = 0
    service_all_sum: float = 0.0
    service_max: float | None = None
    service_min: float | None = None
    below_lower: int = 0
    above_ceiling: int = 0
    sojourn_max: float | None = None
    wait_sum: float = 0.0
    wait_n: int = 0
    drops: int = 0
    assured_drops: int = 0
    max_backlog: int = 0
    violations: int = 0
    af: int = 0
    sf: int = 0
    lowered: int = 0
    phase_worst: float | None = None
    opp_done: int = 0  # unfloored requests completed by the last arrival (surplus throughput × span)
    rb: int = 0  # RB violations (surplus in flight above C − R)
    #: SF's preconditions seen broken in the run (DESIGN §12): condition -> breaks, from the watch's
    #: alert records and recomputed from the trace (`rvguard.attribution`)
    breaks: dict[str, int] = field(default_factory=dict)


@dataclass
class _Scan:
    """A single pass over a trace's events."""

    floored: frozenset[str]
    arrive: dict[str, Arrive] = field(default_factory=dict)
    start: dict[str, float] = field(default_factory=dict)
    admitted: int = 0
    rejected: int = 0
    lowered: int = 0
    drops: int = 0
    assured_drops: int = 0
    opp_missed: int = 0
    opp_judged: int = 0
    services: list[float] = field(default_factory=list)
    all_services: list[float] = field(default_factory=list)
    sojourns: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    opp_done: list[float] = field(default_factory=list)
    span: float = 0.0

    def feed(self, ev: Event) -> None:
        if isinstance(ev, Arrive):
            self.arrive[ev.rid] = ev
            self.span = max(self.span, ev.t)
            return
        a = self.arrive.get(ev.rid)
        if a is None:
            return
        assured = a.tenant in self.floored
        if isinstance(ev, Admit):
            self.admitted += assured
        elif isinstance(ev, Reject):
            self.rejected += assured
            self.lowered += ev.reason == "floor-lowered"
        elif isinstance(ev, Drop):
            self.drops += 1
            self.assured_drops += assured
        elif isinstance(ev, Dispatch):
            self.start[ev.rid] = ev.t
            if assured:
                self.waits.append(ev.t - a.t)
        elif isinstance(ev, Complete):
            self._complete(ev, a, assured)

    def _complete(self, ev: Complete, a: Arrive, assured: bool) -> None:
        s = ev.t - self.start.pop(ev.rid, ev.t)
        self.all_services.append(s)
        if assured:
            self.services.append(s)
            self.sojourns.append(ev.t - a.t)
        else:
            self.opp_judged += 1
            self.opp_missed += a.deadline is not None and ev.t > a.deadline
            self.opp_done.append(ev.t)


def breaks_seen(evidence: Attribution) -> dict[str, int]:
    """SF's preconditions broken in one run, by condition (the watch's and those recomputed)."""
    breaks: dict[str, int] = {}
    for b in evidence.all_breaks():
        breaks[b.condition] = breaks.get(b.condition, 0) + 1
    return breaks


def record_run(
    contract: Contract,
    events: Sequence[Event],
    metrics: Metrics,
    violations: Sequence[Violation],
    *,
    phase_worst: float | None = None,
) -> RunRecord:
    """Reduce one run (its trace, the monitors' metrics and verdicts) to a `RunRecord`."""
    scan = _Scan(frozenset(contract.floored_tenants))
    evidence = Attribution(contract)
    for ev in events:
        scan.feed(ev)
        evidence.feed(ev)
    breaks = breaks_seen(evidence)
    svc = metrics.service_assured
    return RunRecord(
        missed=metrics.admitted_missed,
        judged=metrics.admitted_judged,
        unmet=metrics.offered_unmet_count,
        offered=metrics.offered_judged,
        attained=metrics.entitled_attained,
        entitled=metrics.entitled,
        admitted=scan.admitted,
        rejected=scan.rejected,
        opp_missed=scan.opp_missed,
        opp_judged=scan.opp_judged,
        span=scan.span,
        service_sum=sum(scan.services),
        service_n=len(scan.services),
        service_all_sum=sum(scan.all_services),
        service_max=max(scan.services, default=None),
        service_min=min(scan.services, default=None),
        below_lower=svc.below_lower,
        above_ceiling=svc.above_ceiling,
        sojourn_max=max(scan.sojourns, default=None),
        wait_sum=sum(scan.waits),
        wait_n=len(scan.waits),
        drops=scan.drops,
        assured_drops=scan.assured_drops,
        max_backlog=metrics.max_assured_backlog,
        violations=sum(1 for v in violations if v.property in ("AF", "DR", "WF")),
        af=sum(1 for v in violations if v.property == "AF"),
        sf=sum(1 for v in violations if v.property == "SF"),
        lowered=scan.lowered,
        phase_worst=phase_worst,
        opp_done=sum(1 for t in scan.opp_done if t <= scan.span),
        rb=sum(1 for v in violations if v.property == "RB"),
        breaks=breaks,
    )


def _fraction(num: Sequence[int], den: Sequence[int]) -> tuple[float | None, list[float]]:
    p, (lo, hi) = pooled_interval(num, den)
    return p, [lo, hi]


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


@dataclass(frozen=True)
class Condition:
    """One cell of an experiment: its parameters and its runs' records, pooled.

    ``violations`` counts AF, DR and WF violations (an unguarded baseline
    violates AF whenever it rejects a floor-entitled request; the guard
    never does); SF is reported apart, as a miss.
    """

    params: dict[str, Any]
    runs: tuple[RunRecord, ...]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def reps(self) -> int:
        """Runs pooled."""
        return len(self.runs)

    def _col(self, name: str) -> list[Any]:
        return [getattr(r, name) for r in self.runs]

    @property
    def missed(self) -> tuple[int, ...]:
        """Per run: admitted assured requests that missed."""
        return tuple(self._col("missed"))

    @property
    def judged(self) -> tuple[int, ...]:
        """Per run: admitted assured requests judged."""
        return tuple(self._col("judged"))

    @property
    def assured_miss(self) -> float | None:
        """Pooled miss fraction of admitted assured requests."""
        return pooled_interval(self.missed, self.judged)[0]

    @property
    def assured_miss_ci(self) -> tuple[float, float]:
        """95 % clustered Clopper–Pearson interval (see `rvguard.sim.stats`)."""
        return pooled_interval(self.missed, self.judged)[1]

    @property
    def offered_unmet(self) -> float | None:
        """Pooled unmet fraction of offered assured requests."""
        return pooled_interval(self._col("unmet"), self._col("offered"))[0]

    @property
    def floor_attainment(self) -> float | None:
        """Entitled requests admitted and on time / entitled requests, pooled."""
        p = pooled_interval(self._unattained(), self._col("entitled"))[0]
        return None if p is None else 1.0 - p

    def _unattained(self) -> list[int]:
        return [r.entitled - r.attained for r in self.runs]

    @property
    def af_violations(self) -> int:
        """AF violations over every run."""
        return sum(int(x) for x in self._col("af"))

    @property
    def dr_wf_violations(self) -> int:
        """DR and WF violations over every run."""
        return sum(int(x) for x in self._col("violations")) - self.af_violations

    @property
    def rho_eff(self) -> float | None:
        """Mean over runs of admitted assured rate × mean assured service / C (needs ``info['slots']``)."""
        return _mean(
            [r.admitted / r.span * r.service_sum / r.service_n / self._slots() for r in self._timed()]
        )

    def _timed(self) -> list[RunRecord]:
        return [r for r in self.runs if r.span > 0 and r.service_n > 0]

    def _slots(self) -> int:
        return int(self.info.get("slots", 4))

    def to_dict(self) -> dict[str, Any]:
        """The ``conditions`` entry of ``experiment --json`` (DESIGN §8, extended)."""
        miss, miss_ci = _fraction(self.missed, self.judged)
        unmet, unmet_ci = _fraction(self._col("unmet"), self._col("offered"))
        unatt, (ulo, uhi) = pooled_interval(self._unattained(), self._col("entitled"))
        out: dict[str, Any] = {
            "params": dict(self.params),
            "reps": self.reps,
            "assured_miss": miss,
            "assured_miss_ci": miss_ci,
            "offered_unmet": unmet,
            "offered_unmet_ci": unmet_ci,
            "floor_attainment": None if unatt is None else 1.0 - unatt,
            "floor_attainment_ci": [1.0 - uhi, 1.0 - ulo],
            "rho_eff": self.rho_eff,
            "runs_with_miss": sum(1 for m in self.missed if m),
            **self._counts(),
            **self._envelope(),
            **self.info,
        }
        return out

    def _counts(self) -> dict[str, Any]:
        opp, opp_ci = _fraction(self._col("opp_missed"), self._col("opp_judged"))
        return {
            "rho_total": _mean([r.service_all_sum / r.span / self._slots() for r in self.runs if r.span > 0]),
            "offered": sum(self._col("offered")),
            "admitted": sum(self._col("admitted")),
            "rejected": sum(self._col("rejected")),
            "entitled": sum(self._col("entitled")),
            "opp_miss": opp,
            "opp_miss_ci": opp_ci,
            "violations": sum(self._col("violations")),
            "af_violations": self.af_violations,
            "dr_wf_violations": self.dr_wf_violations,
            "sf_violations": sum(self._col("sf")),
            "dr_drops": sum(self._col("drops")),
            "dr_drops_assured": sum(self._col("assured_drops")),
            "floor_lowered_rejects": sum(self._col("lowered")),
            "assured_wait_mean": _mean([r.wait_sum / r.wait_n for r in self.runs if r.wait_n]),
        }

    def _preconditions(self) -> dict[str, Any]:
        """ "held" when no run broke a precondition of SF (the watch's alerts, or recomputed from the
        trace), else "broken" with the breaks by condition: a guarded miss under held preconditions
        is a defect, under broken ones the watch doing its job (DESIGN §12)."""
        total: dict[str, int] = {}
        for r in self.runs:
            for condition, n in r.breaks.items():
                total[condition] = total.get(condition, 0) + n
        broken = sum(1 for r in self.runs if r.breaks)
        return {
            "preconditions": "broken" if broken else "held",
            "precondition_breaks": dict(sorted(total.items())),
            "runs_preconditions_broken": broken,
        }

    def _envelope(self) -> dict[str, Any]:
        hi = [x for x in self._col("service_max") if x is not None]
        lo = [x for x in self._col("service_min") if x is not None]
        soj = [x for x in self._col("sojourn_max") if x is not None]
        n = sum(self._col("service_n"))
        phase = [x for x in self._col("phase_worst") if x is not None]
        return {
            "assured_service_mean": sum(self._col("service_sum")) / n if n else None,
            "assured_service_max": max(hi, default=None),
            "assured_service_min": min(lo, default=None),
            "below_lower_fraction": sum(self._col("below_lower")) / n if n else None,
            "above_ceiling_fraction": sum(self._col("above_ceiling")) / n if n else None,
            "assured_sojourn_max": max(soj, default=None),
            "max_assured_backlog": max(self._col("max_backlog"), default=0),
            **self._preconditions(),
            "phase_worst_attainment": min(phase) if phase else None,
        }
