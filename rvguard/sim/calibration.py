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
from ..events import Complete, Dispatch, Event
from .backend import CALIBRATION, BackendModel
from .experiments import MARQUEE_CONTRACT
from .plots import pyplot
from .run import run_once
from .workloads import poisson

__all__ = ["measure", "plot_calibration", "services"]


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


def measure(model: BackendModel, contract: Contract = MARQUEE_CONTRACT) -> dict[str, float]:
    """The model's value of every `CALIBRATION` point (long seeded runs, as documented)."""
    rng = random.Random(1)
    got = {"batch1_median_16": statistics.median(model.draw(16, 1, rng) for _ in range(20_000))}
    light = poisson(contract, random.Random(2), assured_rate=6.0, opp_rate=0.0, duration=150.0)
    got["light_mean_16"] = statistics.fmean(services(run_once(contract, light, model=model).result.events))
    flood = poisson(contract, random.Random(2), assured_rate=6.0, opp_rate=30.0, duration=150.0)
    res = run_once(contract, flood, model=model).result
    s = sorted(services(res.events))
    got["flood_mean_16"] = statistics.fmean(s)
    got["ceiling_p999_16"] = s[int(0.999 * len(s))]
    got["batchC_mean_16"] = got["flood_mean_16"]
    got["mu_sat"] = len(s) / res.end_time
    flood48 = poisson(contract, random.Random(2), assured_rate=0.0, opp_rate=30.0, duration=100.0, tokens=48)
    got["batchC_mean_48"] = statistics.fmean(services(run_once(contract, flood48, model=model).result.events))
    return got


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
        right.plot(ells, [m.mean_base(ell, n) for ell in ells], label=f"model, batch {n} (no stalls)")
    right.plot(ells, [0.183 + 0.0149 * ell for ell in ells], "k--", label="reference batch-C 183+14.9ℓ ms")
    right.scatter([16], [0.236], color="red", zorder=3, label="reference batch-1 median 236 ms")
    right.scatter(
        [16, 16], [0.386, 0.460], color="orange", zorder=3, label="reference light / flood 386 / 460 ms"
    )
    right.axhline(0.66, color="grey", linestyle=":", label="reference ceiling 660 ms")
    right.set_xlabel("output tokens ℓ")
    right.set_ylabel("mean service (s)")
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
