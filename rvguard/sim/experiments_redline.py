"""``rvguard experiment redline-alpha``: the redline's α, false triggers against detection lag.

The runbook's one real tuning decision: α trades false-trigger risk against detection lag, and
the answer is to run the simulation against your own glitch and noise profile, not to reuse a
number. For each α of a grid this experiment replays the *same* seeded signals (paired: a
difference between two α is the smoothing's, not the draw's) through the real
`rvguard.enforce.redline.Redline`:

* **false-trigger probability** — the share of quiet runs (``--samples`` scrapes, no real
  pressure, glitches included) in which the redline began firing at least once after a warm-up
  of ``--warmup`` samples, with a 95% Clopper-Pearson interval; also the mean firings per hour.
  (The warm-up is there because Ĥ starts at the first sample: a glitching first sample fires the
  redline at any α. That start is the redline's, measured apart: it is not what α tunes.);
* **detection lag** — on surge runs (the true headroom ramps down through ``h_min``), the time
  from the true crossing to the redline's last off→on toggle (from then on it stays firing); the
  median and the 95th percentile over runs, and how many surges it never caught.

The recommended α is the largest with no false trigger observed (the least lag at zero false
triggers in this profile). One PNG: false-trigger probability and lag over α.

Cost: O(|grid| · reps · samples) redline updates (about 1 µs each).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..enforce.redline import HeadroomSample, Redline, RedlineConfig, ResourceLimit
from ..errors import SpecError
from .headroom_signal import SignalModel, quiet_run, surge_run
from .plots import check_out_dir, pyplot
from .stats import clopper_pearson

__all__ = ["ALPHAS", "AlphaPoint", "AlphaResult", "alpha_sweep", "main_add_arguments", "run"]

NAME = "redline-alpha"
ALPHAS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 21))
DEFAULT_REPS = 200
DEFAULT_SAMPLES = 240  # one hour of 15 s scrapes
_DEFAULT = SignalModel()


@dataclass(frozen=True)
class AlphaPoint:
    """One α's measurements."""

    alpha: float
    reps: int
    false_trigger: float
    false_trigger_ci: tuple[float, float]
    triggers_per_hour: float
    lag_median: float | None
    lag_p95: float | None
    missed: int

    def to_dict(self) -> dict[str, Any]:
        """One ``conditions`` entry of the ``--json`` object."""
        return {
            "params": {"alpha": self.alpha},
            "reps": self.reps,
            "false_trigger": self.false_trigger,
            "false_trigger_ci": list(self.false_trigger_ci),
            "triggers_per_hour": self.triggers_per_hour,
            "lag_median": self.lag_median,
            "lag_p95": self.lag_p95,
            "missed": self.missed,
        }


@dataclass(frozen=True)
class AlphaResult:
    """The sweep: a point per α, the profile it ran on, and the α it recommends."""

    points: tuple[AlphaPoint, ...]
    model: SignalModel
    limit: ResourceLimit
    horizon: float
    samples: int
    warmup: int

    @property
    def recommended(self) -> float | None:
        """The largest α with no false trigger observed (``None``: every α triggered falsely)."""
        quiet = [p.alpha for p in self.points if p.false_trigger == 0.0]
        return max(quiet) if quiet else None


def _triggers(
    redline: Redline, samples: Sequence[HeadroomSample], after: float = -math.inf
) -> tuple[int, float | None]:
    """(off→on toggles at or after ``after``, the time of the last toggle if it still fires at the end)."""
    count, last_on = 0, None
    for s in samples:
        reading = redline.observe(s)
        if reading.toggled and reading.firing:
            count += reading.sample_time >= after
            last_on = reading.sample_time
    return count, (last_on if redline.firing else None)


def _percentile(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _point(
    alpha: float,
    runs: list[tuple[list[HeadroomSample], list[HeadroomSample], float]],
    config: RedlineConfig,
    after: float,
) -> AlphaPoint:
    cfg = RedlineConfig(config.resources, alpha=alpha, horizon=config.horizon, dwell=config.dwell)
    fired = total = 0
    hours = 0.0
    lags: list[float] = []
    for quiet, surge, crossing in runs:
        n, _ = _triggers(Redline(cfg), quiet, after)
        fired += n > 0
        total += n
        hours += (quiet[-1].t - after) / 3600.0
        _, detected = _triggers(Redline(cfg), surge)
        if detected is not None:
            lags.append(detected - crossing)
    reps = len(runs)
    return AlphaPoint(
        alpha=alpha,
        reps=reps,
        false_trigger=fired / reps,
        false_trigger_ci=clopper_pearson(fired, reps),
        triggers_per_hour=total / hours if hours else 0.0,
        lag_median=statistics.median(lags) if lags else None,
        lag_p95=_percentile(lags, 0.95) if lags else None,
        missed=reps - len(lags),
    )


def alpha_sweep(
    *,
    alphas: Sequence[float] = ALPHAS,
    reps: int = DEFAULT_REPS,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    model: SignalModel | None = None,
    limit: ResourceLimit | None = None,
    horizon: float = 0.0,
    dwell: int = 1,
    warmup: int = 20,
) -> AlphaResult:
    """Measure false triggers and lag for each α on the same seeded signals (module doc)."""
    model = model or SignalModel()
    limit = limit or ResourceLimit("kv_cache", h_min=0.2, margin=0.05)
    config = RedlineConfig((limit,), alpha=0.5, horizon=horizon, dwell=dwell)
    runs = []
    for rep in range(reps):
        rng = random.Random(f"{NAME}:{seed}:{rep}")
        quiet = quiet_run(model, rng, samples, resource=limit.name)
        surge, episode = surge_run(model, rng, samples, h_min=limit.h_min, resource=limit.name)
        runs.append((quiet, surge, episode.crossing))
    after = warmup * model.period
    points = tuple(_point(a, runs, config, after) for a in alphas)
    return AlphaResult(points, model, limit, horizon, samples, warmup)


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def render(result: AlphaResult) -> str:
    """The table and the recommendation."""
    m, lim = result.model, result.limit
    lines = [
        f"experiment {NAME}: h_min {lim.h_min:g}, margin {lim.margin:g}, horizon {result.horizon:g} s; "
        f"signal level {m.level:g} ± {m.noise:g}, period {m.period:g} ± {m.jitter:g} s, glitches "
        f"{m.glitch_rate:g}/sample × {m.glitch_length} deep {m.glitch_depth:g}; "
        f"{result.points[0].reps} quiet and surge runs of {result.samples} samples each "
        f"(false triggers counted after {result.warmup} samples)",
        f"{'alpha':>6}  {'false trigger [95% CI]':<26}{'per hour':>9}{'lag median':>11}"
        f"{'lag p95':>9}{'missed':>7}",
    ]
    for p in result.points:
        ci = f"{p.false_trigger:.3f} [{p.false_trigger_ci[0]:.3f}, {p.false_trigger_ci[1]:.3f}]"
        lines.append(
            f"{p.alpha:>6.2f}  {ci:<26}{p.triggers_per_hour:>9.3f}{_s(p.lag_median):>11}{_s(p.lag_p95):>9}"
            f"{p.missed:>7}"
        )
    rec = result.recommended
    lines.append(
        "recommended alpha (largest with no false trigger seen): "
        + ("none" if rec is None else f"{rec:g}")
        + " — for this profile only; run it on your own exporter's noise and glitches"
    )
    return "\n".join(lines)


def plot(result: AlphaResult, out: str | Path) -> Path:
    """False-trigger probability (left axis) and detection lag (right axis) over α."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    xs = [p.alpha for p in result.points]
    ax.plot(xs, [p.false_trigger for p in result.points], "o-", color="tab:red", label="false-trigger prob.")
    ax.fill_between(
        xs,
        [p.false_trigger_ci[0] for p in result.points],
        [p.false_trigger_ci[1] for p in result.points],
        color="tab:red",
        alpha=0.15,
    )
    ax.set_xlabel("alpha (EWMA weight of each sample)")
    ax.set_ylabel("false-trigger probability per run", color="tab:red")
    lag = ax.twinx()
    nan = float("nan")
    lag.plot(
        xs, [nan if p.lag_median is None else p.lag_median for p in result.points], "s-", label="lag median"
    )
    lag.plot(xs, [nan if p.lag_p95 is None else p.lag_p95 for p in result.points], "s--", label="lag p95")
    lag.set_ylabel("detection lag after the true crossing (s)")
    lag.legend(loc="upper center", fontsize=8)
    ax.set_title(f"redline alpha: false triggers vs lag ({result.points[0].reps} runs each)", fontsize=9)
    ax.grid(alpha=0.3)
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"{NAME}.png"
    fig.tight_layout()
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target


def main_add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard redline-alpha`` (``rvguard experiment redline-alpha``)."""
    p.add_argument(
        "--reps", type=int, default=DEFAULT_REPS, help=f"quiet and surge runs per α (default {DEFAULT_REPS})"
    )
    p.add_argument(
        "--samples", type=int, default=DEFAULT_SAMPLES, help="scrapes per run (default 240: 1 h at 15 s)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=20, help="samples before false triggers count (default 20)")
    p.add_argument("--horizon", type=float, default=0.0, help="projection horizon, s (default 0: level only)")
    p.add_argument("--glitch-rate", type=float, default=_DEFAULT.glitch_rate, help="glitches per sample")
    p.add_argument("--glitch-length", type=int, default=_DEFAULT.glitch_length, help="samples a glitch lasts")
    p.add_argument("--noise", type=float, default=_DEFAULT.noise, help="σ of each sample")
    p.add_argument("--out", default="results", help="directory for the PNG plot")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> bool:
    """Run the sweep; print the table (or JSON) and write the PNG. A measurement: always True."""
    check_out_dir(args.out)
    pyplot()
    if args.reps < 1:
        raise SpecError(f"--reps must be ≥ 1, got {args.reps}", field="reps")
    if args.samples < 8 or not 0 <= args.warmup < args.samples // 2:
        raise SpecError(
            f"need --samples ≥ 8 and 0 ≤ --warmup < samples/2, got {args.samples} and {args.warmup}",
            field="samples",
        )
    try:
        model = SignalModel(noise=args.noise, glitch_rate=args.glitch_rate, glitch_length=args.glitch_length)
    except ValueError as exc:
        raise SpecError(str(exc), field="signal") from None
    started = time.monotonic()
    result = alpha_sweep(
        reps=args.reps, samples=args.samples, seed=args.seed, model=model, horizon=args.horizon
    )
    png = plot(result, args.out)
    if args.json:
        doc = {
            "experiment": NAME,
            "method": "paired seeded signals; false trigger = share of quiet runs with ≥ 1 firing "
            "(95% Clopper-Pearson); lag = last off→on toggle − true crossing on surge runs",
            "recommended_alpha": result.recommended,
            "warmup_samples": result.warmup,
            "conditions": [p.to_dict() for p in result.points],
            "plot": str(png),
            "seconds": time.monotonic() - started,
        }
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print(render(result))
        print(f"plot: {png}  ({time.monotonic() - started:.1f} s)")
    return True


class Command:
    """The plugin object `rvguard.cli.registry` loads."""

    add_arguments = staticmethod(main_add_arguments)
    run = staticmethod(run)
