"""``rvguard screen-eval``: the screen's evaluation table, JSON and precision-vs-coverage PNG.

Declared in `rvguard.screen.commands`, also as the experiment ``rvguard experiment
screen-eval`` (the CLI routes that name here; the simulator's command does not know it):
the evaluation is a screen concern and its result is not an `ExperimentResult` (no miss
plot), so its code lives with the screen.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..errors import SpecError
from ..sim.plots import check_out_dir, pyplot
from .evaluate import (
    CURVE,
    DIALS,
    REGIMES,
    EvalResult,
    Row,
    conditions,
    default_grid,
    evaluate,
    held_out_rows,
    in_sample_rows,
    small_grid,
)
from .predict import CAVEAT, LABEL

__all__ = ["add_arguments", "dial_curve", "plot_precision_coverage", "render_eval", "run"]

NAME = "screen-eval"
DEFAULT_REPS = 10


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def render_eval(result: EvalResult) -> str:
    """The table: scope × dial × regime → cells, coverage, precision [CI], recall [CI]."""
    head = (
        f"experiment screen-eval — {CAVEAT}\n"
        f"{len(result.runs)} configurations × {len(result.runs[0].reps)} reps, 30 deadlines each; "
        f"held-out: {result.folds} folds (service from one rep, tested on the others); "
        "95% intervals: bootstrap over configurations"
    )
    columns = (
        f"{'scope':<10}{'dial':<6}{'regime':<10}{'cfgs':>5}{'cells':>7}{'accepts':>8}"
        f"{'FA':>5}{'coverage':>10}  {'precision [95% CI]':<26}recall [95% CI]"
    )
    lines = [head, columns]
    for r in result.rows:
        s = r.score
        lines.append(
            f"{r.scope:<10}{r.dial:<6}{r.regime:<10}{s.configs:>5}{s.cells:>7}{s.accepts:>8}{s.false_accepts:>5}"
            f"{_pct(s.coverage):>10}  {_pct(s.precision) + ' ' + _ci(s.precision_ci):<26}"
            f"{_pct(s.recall)} {_ci(s.recall_ci)}"
        )
    return "\n".join(lines)


def plot_precision_coverage(result: EvalResult, curve: dict[str, list[Row]], out: str | Path) -> Path:
    """Precision against coverage, one point per service dial, in-sample and held-out."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for scope, marker in (("in-sample", "o"), ("held-out", "s")):
        rows = curve[scope]
        xs = [r.score.coverage or 0.0 for r in rows]
        ys = [r.score.precision if r.score.precision is not None else float("nan") for r in rows]
        ax.plot(xs, ys, marker=marker, label=scope)
        for r, x, y in zip(rows, xs, ys, strict=True):
            ax.annotate(r.dial, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("coverage (share of cells accepted)")
    ax.set_ylabel("precision of accept")
    ax.set_title(f"P95 screen, {len(result.runs)} configurations ({LABEL})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    target = path / "screen-eval.png"
    fig.tight_layout()
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target


def dial_curve(result: EvalResult) -> dict[str, list[Row]]:
    """All-regime rows for the plot's dial sweep (reuses the runs; only the screen is re-run)."""
    runs = list(result.runs)
    ins, _ = in_sample_rows(runs, CURVE)
    held = held_out_rows(runs, CURVE, result.folds)
    return {
        "in-sample": [r for r in ins if r.regime == "all"],
        "held-out": [r for r in held if r.regime == "all"],
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard screen-eval`` (``rvguard experiment screen-eval``)."""
    p.add_argument("--reps", type=int, default=None, help=f"runs per configuration (default {DEFAULT_REPS})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results", help="directory for the PNG plot")
    p.add_argument("--json", action="store_true")
    p.add_argument("--folds", type=int, default=None, help="held-out folds (default: reps)")
    p.add_argument("--grid", choices=("default", "small"), default=None, help="the grid of configurations")


def _options(args: argparse.Namespace) -> tuple[int, int | None]:
    """(reps, folds), checked before anything runs; the plot directory and the sim extra too."""
    check_out_dir(args.out)
    pyplot()
    reps = DEFAULT_REPS if args.reps is None else int(args.reps)
    if reps < 2:
        raise SpecError(f"screen-eval needs --reps ≥ 2 (held-out folds), got {reps}", field="reps")
    folds = args.folds
    if folds is not None and not 1 <= folds <= reps:
        raise SpecError(
            f"--folds must be between 1 and --reps ({reps}): each fold calibrates on one rep, got {folds}",
            field="folds",
        )
    return reps, folds


def run(args: argparse.Namespace) -> bool:
    """Run the evaluation; print the table (or JSON) and write the PNG. A measurement: always True."""
    reps, folds = _options(args)
    grid = small_grid() if args.grid == "small" else default_grid()
    started = time.monotonic()
    result = evaluate(grid, reps=reps, folds=folds, seed=args.seed)
    curve = dial_curve(result)
    plot = plot_precision_coverage(result, curve, args.out)
    if args.json:
        doc = {
            "experiment": NAME,
            "label": LABEL,
            "caveat": CAVEAT,
            "method": "cells = configuration x 30 deadlines (measured P95 x factors in [0.5, 2]); "
            "95% CI: bootstrap over configurations",
            "dials": list(DIALS),
            "regimes": list(REGIMES),
            "conditions": conditions(result),
            "summary": [r.to_dict() for r in result.rows],
            "curve": {k: [r.to_dict() for r in v] for k, v in curve.items()},
            "plot": str(plot),
            "seconds": time.monotonic() - started,
        }
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print(render_eval(result))
        print(f"plot: {plot}  ({time.monotonic() - started:.1f} s)")
    return True
