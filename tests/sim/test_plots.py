"""Plots are written as PNG files (Agg backend)."""

from __future__ import annotations

from pathlib import Path

from rvguard.sim.experiments import fifo_ablation
from rvguard.sim.plots import plot_experiment

from ._common import MARQUEE


def test_plot_written(tmp_path: Path) -> None:
    result = fifo_ablation(MARQUEE, reps=1, seed=0)
    path = plot_experiment(result, tmp_path / "sub")
    assert path == tmp_path / "sub" / "fifo-ablation.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
