"""A command whose output needs an extra refuses at once when it is missing, before any work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import rvguard.screen.eval_cli
import rvguard.sim.cli
import rvguard.study.cli
from rvguard.cli import main


def _no_work(*_: object, **__: object) -> None:
    raise AssertionError("the command started its work before checking its extras")


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--reps", "1"],
        ["experiment", "beta-sweep", "--reps", "1"],
        ["screen-eval", "--grid", "small"],
    ],
)
def test_missing_matplotlib_is_refused_before_simulating(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    monkeypatch.setattr(rvguard.sim.cli, "run_experiment", _no_work)
    monkeypatch.setattr(rvguard.study.cli, "run_experiment", _no_work)
    monkeypatch.setattr(rvguard.sim.cli, "EXPERIMENTS", dict.fromkeys(rvguard.sim.cli.EXPERIMENTS, _no_work))
    monkeypatch.setattr(rvguard.screen.eval_cli, "evaluate", _no_work)
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "matplotlib is not installed: pip install 'rvguard[sim]'" in err and "Traceback" not in err
