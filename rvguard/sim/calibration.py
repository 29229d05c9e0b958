"""The backend model against the reference study's figures (DESIGN §7), measured and plotted.

Why a module: the calibration table in docs/simulator.md, its plot and the
test that holds the model to `CALIBRATION` must all measure the same way.
`measure` runs the seeded workloads once; `plot_calibration` draws the
model against the reference points. Regenerate the committed plot with::

    python -m rvguard.sim.calibration docs/calibration.png
"""

from __future__ import annotations

import random
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from ..contract import Contract
from ..events import Arrive, Complete, Dispatch, Event
from .backend import CALIBRATION, BackendModel
from .loads import MARQUEE_CONTRACT, marquee_arrivals
from .plots import pyplot
from .run import run_once
from .workloads import poisson

__all__ = ["assured_services", "measure", "plot_calibration", "services"]


def services(events: Sequence[Event]) -> list[float]:
    """Observed services (complete − dispatch) in trace order."""
    start: dict[str, float] = {}
    out: list[float] = []
    for ev in events:
        if isinstance(ev, Dispatch):
            start[ev.rid] = ev.t
        elif isinstance(ev, Complete):
            out.append(ev.t - start[ev.rid])
    return out


def _together(model: BackendModel, n: int, tokens: int, rng: random.Random) -> list[float]:
    """Services of ``n`` requests dispatched at once on an idle engine (the clean same-batch probe)."""
    backend = model.backend(rng)
    for i in range(n):
        backend.start(f"b{i}", tokens, None, 0.0)
    out: list[float] = []
    while len(out) < n:
        t = backend.next_time()
        assert t is not None
        out += [t] * len(backend.advance(t))
    return out


def _probe(model: BackendModel, n: int, tokens: int, reps: int = 2000) -> float:
    rng = random.Random(1)
    return statistics.median(x for _ in range(reps) for x in _together(model, n, tokens, rng))


def measure(model: BackendModel, contract: Contract = MARQUEE_CONTRACT) -> dict[str, float]:
    """The model's value of every `CALIBRATION` point, and its envelope excursions (long seeded runs).

    ``light`` is the assured stream alone (Poisson 6/s), ``flood`` adds 30/s
    opportunistic (every slot busy); the batch probes start 1 or C requests
    together on an idle engine; ``marquee_max_16`` is the largest assured
    service over 10 guarded marquee runs. ``below_lower_light`` and
    ``above_ceiling_flood`` are the fractions of services outside [L, s_max].
    """
    got = {
        "batch1_median_16": _probe(model, 1, 16),
        "batchC_mean_16": _probe(model, model.slots, 16),
        "batchC_mean_48": _probe(model, model.slots, 48),
    }
    light = poisson(contract, random.Random(2), assured_rate=6.0, opp_rate=0.0, duration=150.0)
    s_light = services(run_once(contract, light, model=model).result.events)
    got["light_mean_16"] = statistics.fmean(s_light)
    flood = poisson(contract, random.Random(2), assured_rate=6.0, opp_rate=30.0, duration=150.0)
    res = run_once(contract, flood, model=model).result
    s = sorted(services(res.events))
    got["flood_mean_16"] = statistics.fmean(s)
    got["mu_sat"] = len(s) / res.end_time
    marquee = [
        x
        for rep in range(10)
        for x in assured_services(
            run_once(contract, marquee_arrivals(contract, 0, rep), model=model).result.events, contract
        )
    ]
    got["marquee_max_16"] = max(marquee)
    lower, ceiling = contract.lower_bound(16), contract.service.s_max
    got["below_lower_light"] = sum(x < lower for x in s_light) / len(s_light)
    got["above_ceiling_flood"] = sum(x > ceiling for x in s) / len(s)
    return got


def assured_services(events: Sequence[Event], contract: Contract) -> list[float]:
    """Observed services of the floored tenants' requests."""
    floored = {e.rid for e in events if isinstance(e, Arrive) and e.tenant in contract.floored_tenants}
    start: dict[str, float] = {}
    out: list[float] = []
    for ev in events:
        if isinstance(ev, Dispatch) and ev.rid in floored:
            start[ev.rid] = ev.t
        elif isinstance(ev, Complete) and ev.rid in start:
            out.append(ev.t - start.pop(ev.rid))
    return out


def plot_calibration(path: str | Path, model: BackendModel | None = None) -> Path:
    """Write the calibration figure: relative error per point, and service against ℓ and batch."""
    plt = pyplot()
    m = model or BackendModel()
    got = measure(m)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [p.name for p in CALIBRATION]
    errs = [100 * (got[p.name] - p.target) / p.target for p in CALIBRATION]
    tols = [100 * p.tolerance for p in CALIBRATION]
    ys = range(len(names))
    left.barh(ys, tols, left=[-t for t in tols], height=0.6, color="#dde", label="tolerance")
    left.barh(ys, tols, left=0, height=0.6, color="#dde")
    left.scatter(errs, ys, color="C0", zorder=3, label="model − reference")
    left.axvline(0, color="black", linewidth=0.8)
    left.set_yticks(list(ys), [f"{n} ({p.target:g})" for n, p in zip(names, CALIBRATION, strict=True)])
    left.set_xlabel("relative error (%)")
    left.set_title("model vs DESIGN §7 reference points")
    left.legend(fontsize=7)
    ells = list(range(1, 65))
    for n in (1, 2, 3, m.slots):
        right.plot(ells, [m.mean_base(ell, n) for ell in ells], label=f"model, {n} started together")
    right.plot(ells, [0.183 + 0.0149 * ell for ell in ells], "k--", label="reference batch-C 183+14.9ℓ ms")
    right.scatter([16], [0.236], color="red", zorder=3, label="reference batch-1 median 236 ms")
    right.scatter(
        [16, 16], [0.386, 0.460], color="orange", zorder=3, label="reference light / flood 386 / 460 ms"
    )
    right.axhline(0.66, color="grey", linestyle=":", label="reference ceiling 660 ms")
    right.set_xlabel("output tokens ℓ")
    right.set_ylabel("service, no noise (s)")
    right.set_title("service vs output length and batch")
    right.legend(fontsize=6)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


if __name__ == "__main__":  # pragma: no cover - a script entry point
    print(plot_calibration(sys.argv[1] if len(sys.argv) > 1 else "docs/calibration.png"))
