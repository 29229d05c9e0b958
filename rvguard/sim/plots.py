"""PNG plots of experiment results (matplotlib, Agg backend, imported lazily).

Why lazy: matplotlib is the ``rvguard[sim]`` extra; ``import rvguard.sim``
must work without it, and only writing a plot needs it. Without it the
error names the extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, SpecError
from .experiments import ExperimentResult

__all__ = ["check_out_dir", "plot_experiment", "pyplot"]


def check_out_dir(out: str | None) -> None:
    """Refuse a plot directory that cannot be one (exit 2) before the experiment runs, not after."""
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise SpecError(f"--out {out}: exists and is not a directory", field="--out")


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend; a missing install names the ``sim`` extra."""
    try:
        import matplotlib
    except ModuleNotFoundError as err:  # pragma: no cover - depends on the install
        raise MissingExtraError("matplotlib", "sim") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _x(value: Any, categories: list[str]) -> float:
    """Numeric parameters plot as themselves; others (e.g. a dispatch name) by position."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if str(value) not in categories:
        categories.append(str(value))
    return float(categories.index(str(value)))


def _label(params: dict[str, Any], keys: tuple[str, ...]) -> str:
    if keys:
        return " ".join(f"{k}={params.get(k)}" for k in keys)
    return ("guarded" if params.get("guard") else "unguarded") + f" ({params.get('learner', '')})"


def _miss_panel(ax: Any, result: ExperimentResult, x_key: str) -> None:
    groups: dict[str, list[tuple[float, float, float, float]]] = {}
    categories: list[str] = []
    for c in result.conditions:
        if x_key not in c.params or c.assured_miss is None:
            continue
        label = _label(c.params, result.group_keys)
        lo, hi = c.assured_miss_ci
        groups.setdefault(label, []).append((_x(c.params[x_key], categories), c.assured_miss, lo, hi))
    for label, pts in groups.items():
        pts.sort()
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
    if categories:
        ax.set_xticks(range(len(categories)), categories)
    ax.set_xlabel(x_key)
    ax.set_ylabel("assured miss (admitted)")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=7)
    ax.set_title(f"{result.name}: miss vs {x_key} (95% CP, run-clustered)")


def _series_panel(ax: Any, result: ExperimentResult) -> None:
    for s in result.series:
        ax.scatter(s.arrival, s.sojourn, s=6, label=s.label)
    if result.series:
        ax.axhline(result.series[0].deadline, color="red", linestyle="--", label="deadline D")
    ax.set_xlabel("arrival time (s)")
    ax.set_ylabel("assured sojourn (s)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.set_title("assured completion vs deadline (one rep)")


def _info_panel(ax: Any, result: ExperimentResult, x_key: str, key: str, ylabel: str) -> None:
    """One figure of each condition's ``info`` over x, a line per group (`ExperimentResult.panel`)."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for c in result.conditions:
        if x_key in c.params and c.info.get(key) is not None:
            groups.setdefault(_label(c.params, result.group_keys), []).append(
                (_x(c.params[x_key], []), float(c.info[key]))
            )
    for label, pts in groups.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xlabel(x_key)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    ax.set_title(f"{result.name}: {ylabel} vs {x_key}")


def plot_experiment(result: ExperimentResult, out_dir: str | Path, *, x_key: str | None = None) -> Path:
    """Write ``<out_dir>/<name>.png``: miss per condition, and sojourns against the deadline (or the
    experiment's own second panel)."""
    plt = pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result.name}.png"
    first = next(iter(result.conditions[0].params)) if result.conditions else "beta"
    key = x_key or result.x_key or first
    if result.panel is not None:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        _info_panel(right, result, key, *result.panel)
    elif result.series:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        _series_panel(right, result)
    else:
        fig, left = plt.subplots(1, 1, figsize=(6, 4))
    _miss_panel(left, result, key)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
