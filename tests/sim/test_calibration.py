"""The calibration figure: measured from the model, drawn against every reference point."""

from __future__ import annotations

from pathlib import Path

from rvguard.events import Complete, Dispatch
from rvguard.sim.backend import CALIBRATION, BackendModel
from rvguard.sim.calibration import plot_calibration, services


def test_services_pairs_dispatch_and_complete() -> None:
    evs = [Dispatch(1.0, "a"), Dispatch(1.5, "b"), Complete(2.0, "a"), Complete(3.5, "b")]
    assert services(evs) == [1.0, 2.0]


def test_plot_written(tmp_path: Path) -> None:
    path = plot_calibration(tmp_path / "cal.png", BackendModel(sigma=0.1))
    assert path.is_file() and path.stat().st_size > 10_000
    assert len(CALIBRATION) == 7
