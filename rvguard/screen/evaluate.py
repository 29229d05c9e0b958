"""``screen-eval``: how far the P95 screen can be trusted, measured on the simulator.

Method (issue 6; the reference study's §3 table, regenerated):

1. **Grid.** Configurations = slots C × dispatch policy (priority = the
   guard, fifo = the guard's admission with FIFO dispatch) × a nominal
   offered load ρ̂ (total rate = ρ̂·C / 0.437 s, the flood-mean service at
   C = 4). The assured tenant (floor B = 1.5·C per 1 s window, excess
   rejected) is offered min(B/W, half the total); the rest is
   opportunistic, admitted by the admit-all learner.
2. **Runs.** Each configuration runs ``reps`` times (Poisson arrivals,
   ``duration`` seconds, seeded per rep). From each run: the assured
   sojourns (a drop or fail counts as +∞) and the services
   (complete − dispatch) of every completed request.
3. **Cells.** The measured P95 of a configuration pools its reps' sojourns
   (nearest rank). Deadlines are re-thresholds of those measured times:
   ``D_j = P95 · f_j`` for ``DEADLINES`` factors f_j log-spaced in [0.5, 2].
   A cell *holds* when P95 ≤ D_j; the screen *accepts* when its predicted
   P95 ≤ D_j. The prediction does not depend on D, so it is computed once
   per configuration and dial.
4. **Regime** by the measured ρ̂ = offered rate × pooled mean service / C:
   below saturation (< 0.9), near the knee ([0.9, 1.3)), deep overload (≥ 1.3).
5. **In-sample**: the service sample is all reps of the configuration.
   **Held-out**: fold i takes the service sample from rep i alone and
   tests on the other reps (their pooled P95 and their own deadline
   grid), rotated over k folds.

Intervals: `rvguard.screen.scoring` (bootstrap clustered by configuration).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import progress
from ..contract import Contract
from ..enforce.request import Request
from ..events import Arrive, Complete, Dispatch, Drop, Event, Fail
from ..sim.experiments import MARQUEE_CONTRACT
from ..sim.run import run_once
from ..sim.stats import pooled_interval
from ..sim.workloads import poisson
from .predict import Workload, screen
from .queueing import ServiceDistribution
from .scoring import Confusion, Score, score

__all__ = [
    "DIALS",
    "Config",
    "ConfigRuns",
    "EvalResult",
    "Row",
    "default_grid",
    "evaluate",
    "held_out_rows",
    "in_sample_rows",
    "regime_of",
    "run_config",
    "small_grid",
]

NOMINAL_SERVICE = 0.437
DEADLINES = 30
DIALS: tuple[str, ...] = ("p50", "mean", "p99")
CURVE: tuple[str, ...] = ("p50", "mean", "p70", "p80", "p90", "p95", "p99", "p99.9")
REGIMES: tuple[str, ...] = ("below", "knee", "overload")
FACTORS = np.geomspace(0.5, 2.0, DEADLINES)


@dataclass(frozen=True)
class Config:
    """One grid point."""

    slots: int
    policy: str
    load: float

    @property
    def floor(self) -> int:
        """B = 1.5·C per 1 s window (6 at the marquee's C = 4)."""
        return round(1.5 * self.slots)

    @property
    def rates(self) -> tuple[float, float]:
        """(assured, opportunistic) offered rates for the nominal load."""
        total = self.load * self.slots / NOMINAL_SERVICE
        assured = min(float(self.floor), total / 2)
        return assured, total - assured

    def contract(self) -> Contract:
        """The marquee contract at this C and floor."""
        tenants = dict(MARQUEE_CONTRACT.tenants)
        tenants["assured"] = tenants["assured"].model_copy(update={"floor": self.floor})
        return MARQUEE_CONTRACT.model_copy(update={"slots": self.slots, "tenants": tenants})

    def params(self) -> dict[str, object]:
        """What the grid varies (the ``params`` of ``experiment --json``)."""
        a, o = self.rates
        return {
            "slots": self.slots,
            "policy": self.policy,
            "load": self.load,
            "assured_rate": a,
            "opp_rate": o,
        }


def default_grid() -> list[Config]:
    """2 slot counts × 2 policies × 10 loads = 40 configurations."""
    loads = (0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0)
    return [Config(c, p, x) for c in (4, 8) for p in ("priority", "fifo") for x in loads]


def small_grid() -> list[Config]:
    """A 6-configuration grid for tests and quick looks."""
    return [Config(4, p, x) for p in ("priority", "fifo") for x in (0.5, 1.0, 2.0)]


@dataclass(frozen=True)
class RepData:
    """What one run contributes: assured sojourns (+∞ = never completed) and services."""

    sojourns: tuple[float, ...]
    services: tuple[float, ...]
    missed: int
    judged: int


@dataclass(frozen=True)
class ConfigRuns:
    """A configuration and its reps."""

    config: Config
    reps: tuple[RepData, ...]

    def sojourns(self, reps: Sequence[int] | None = None) -> list[float]:
        """Pooled assured sojourns of ``reps`` (all by default)."""
        idx = range(len(self.reps)) if reps is None else reps
        return [s for i in idx for s in self.reps[i].sojourns]

    def service(self, reps: Sequence[int] | None = None) -> ServiceDistribution:
        """Pooled service sample of ``reps``."""
        idx = range(len(self.reps)) if reps is None else reps
        return ServiceDistribution.of([s for i in idx for s in self.reps[i].services])

    @property
    def rho_hat(self) -> float:
        """Measured offered utilisation: offered rate × pooled mean service / C."""
        a, o = self.config.rates
        return (a + o) * self.service().mean / self.config.slots


def regime_of(rho_hat: float) -> str:
    """below (< 0.9), knee ([0.9, 1.3)) or overload (≥ 1.3)."""
    if rho_hat < 0.9:
        return "below"
    return "knee" if rho_hat < 1.3 else "overload"


def _rep_data(events: Sequence[Event], assured: str) -> RepData:
    arrived: dict[str, float] = {}
    started: dict[str, float] = {}
    sojourns: list[float] = []
    services: list[float] = []
    for ev in events:
        if isinstance(ev, Arrive) and ev.tenant == assured:
            arrived[ev.rid] = ev.t
        elif isinstance(ev, Dispatch):
            started[ev.rid] = ev.t
        elif isinstance(ev, Complete):
            services.append(ev.t - started.pop(ev.rid))
            if ev.rid in arrived:
                sojourns.append(ev.t - arrived[ev.rid])
        elif isinstance(ev, Drop | Fail) and ev.rid in arrived:
            sojourns.append(float("inf"))
    return RepData(tuple(sojourns), tuple(services), 0, 0)


def run_config(config: Config, *, reps: int, duration: float, seed: int = 0) -> ConfigRuns:
    """Simulate ``reps`` runs of one configuration (seeded per rep and per configuration)."""
    contract = config.contract()
    a, o = config.rates
    mode = "guarded" if config.policy == "priority" else "gated-fifo"
    out: list[RepData] = []
    for rep in range(reps):
        rng = random.Random(f"screen-eval:{seed}:{config.slots}:{config.load}:{rep}")
        arrivals: list[Request] = poisson(contract, rng, assured_rate=a, opp_rate=o, duration=duration)
        run = run_once(contract, arrivals, mode=mode, seed=seed * 1000 + rep)
        data = _rep_data(run.result.events, "assured")
        m = run.metrics
        out.append(RepData(data.sojourns, data.services, m.admitted_missed, m.admitted_judged))
    return ConfigRuns(config, tuple(out))


def p95(values: Sequence[float]) -> float:
    """Nearest-rank P95 (the definition `rvguard check` uses)."""
    xs = sorted(values)
    return xs[max(0, -(-95 * len(xs) // 100) - 1)]


def predict(runs: ConfigRuns, service: ServiceDistribution, dial: str) -> float:
    """The screen's predicted assured P95 for a configuration, from ``service``."""
    a, o = runs.config.rates
    workload = Workload({"assured": a, "opportunistic": o}, service, policy=runs.config.policy)  # type: ignore[arg-type]
    return screen(runs.config.contract(), workload, percentile=dial).tenants[0].p95


def confusion(predicted: float, measured: float) -> Confusion:
    """The cells of one configuration: deadlines ``measured · FACTORS``."""
    deadlines = measured * FACTORS
    return Confusion.of([bool(predicted <= d) for d in deadlines], [bool(measured <= d) for d in deadlines])


@dataclass(frozen=True)
class Row:
    """One line of the table: a scope (in-sample / held-out), a dial, a regime."""

    scope: str
    dial: str
    regime: str
    score: Score

    def to_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        return {"scope": self.scope, "dial": self.dial, "regime": self.regime, **self.score.to_dict()}


@dataclass(frozen=True)
class EvalResult:
    """Everything ``screen-eval`` measured."""

    runs: tuple[ConfigRuns, ...]
    rows: tuple[Row, ...]
    predictions: dict[tuple[int, str], float] = field(default_factory=dict)
    folds: int = 0

    def row(self, scope: str, dial: str, regime: str = "all") -> Row:
        """The row for (scope, dial, regime); KeyError when absent."""
        for r in self.rows:
            if (r.scope, r.dial, r.regime) == (scope, dial, regime):
                return r
        raise KeyError((scope, dial, regime))


def in_sample_rows(
    runs: Sequence[ConfigRuns], dials: Sequence[str]
) -> tuple[list[Row], dict[tuple[int, str], float]]:
    preds = {(i, d): predict(r, r.service(), d) for i, r in enumerate(runs) for d in dials}
    measured = [p95(r.sojourns()) for r in runs]
    regimes = [regime_of(r.rho_hat) for r in runs]
    rows: list[Row] = []
    for d in dials:
        per = [confusion(preds[(i, d)], measured[i]) for i in range(len(runs))]
        rows.append(Row("in-sample", d, "all", score(per)))
        for g in REGIMES:
            rows.append(
                Row("in-sample", d, g, score([c for c, rg in zip(per, regimes, strict=True) if rg == g]))
            )
    return rows, preds


def held_out_rows(runs: Sequence[ConfigRuns], dials: Sequence[str], folds: int) -> list[Row]:
    regimes = [regime_of(r.rho_hat) for r in runs]
    rows: list[Row] = []
    for d in dials:
        per: list[Confusion] = []
        for r in runs:
            n = len(r.reps)
            total = Confusion(0, 0, 0, 0)
            for i in range(min(folds, n)):
                test = [j for j in range(n) if j != i]
                c = confusion(predict(r, r.service([i]), d), p95(r.sojourns(test)))
                total = Confusion(total.tp + c.tp, total.fp + c.fp, total.fn + c.fn, total.tn + c.tn)
            per.append(total)
        rows.append(Row("held-out", d, "all", score(per)))
        for g in REGIMES:
            rows.append(
                Row("held-out", d, g, score([c for c, rg in zip(per, regimes, strict=True) if rg == g]))
            )
    return rows


def evaluate(
    grid: Sequence[Config],
    *,
    reps: int = 10,
    duration: float = 20.0,
    folds: int | None = None,
    seed: int = 0,
    dials: Sequence[str] = DIALS,
) -> EvalResult:
    """Run the grid and score the screen in-sample and held-out (module doc).

    ``folds`` defaults to ``reps`` (every rep calibrates once); it needs ≥ 2 reps.
    """
    if reps < 2:
        raise ValueError(f"screen-eval needs at least 2 reps (held-out folds), got {reps}")
    k = reps if folds is None else max(1, min(folds, reps))
    with progress.task("configurations", total=len(grid), unit="config") as advance:
        runs = []
        for c in grid:
            runs.append(run_config(c, reps=reps, duration=duration, seed=seed))
            advance(1)
    rows, preds = in_sample_rows(runs, dials)
    rows += held_out_rows(runs, dials, k)
    return EvalResult(tuple(runs), tuple(rows), preds, k)


def conditions(result: EvalResult) -> list[dict[str, object]]:
    """The ``conditions`` of ``experiment --json`` (DESIGN §8), one per configuration."""
    out: list[dict[str, object]] = []
    for i, r in enumerate(result.runs):
        missed = [rep.missed for rep in r.reps]
        judged = [rep.judged for rep in r.reps]
        miss, (lo, hi) = pooled_interval(missed, judged)
        measured = p95(r.sojourns())
        preds = {d: result.predictions.get((i, d)) for d in DIALS}
        out.append(
            {
                "params": {**r.config.params(), "rho_hat": r.rho_hat, "regime": regime_of(r.rho_hat)},
                "reps": len(r.reps),
                "assured_miss": miss,
                "assured_miss_ci": [lo, hi],
                "p95_measured": measured if np.isfinite(measured) else None,
                "p95_predicted": {
                    d: (p if p is not None and np.isfinite(p) else None) for d, p in preds.items()
                },
            }
        )
    return out
