"""``rvguard experiment screen-eval`` end to end on the small grid; other experiments still route."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.screen import LABEL


def test_screen_eval_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["experiment", "screen-eval", "--grid", "small", "--reps", "2", "--out", str(tmp_path)]
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["experiment"] == "screen-eval"
    assert d["label"] == LABEL
    assert Path(d["plot"]).is_file()
    assert {r["dial"] for r in d["summary"]} == {"p50", "mean", "p99"}
    assert {r["scope"] for r in d["summary"]} == {"in-sample", "held-out"}
    assert all({"params", "reps", "assured_miss", "assured_miss_ci"} <= set(c) for c in d["conditions"])
    assert main(args) == 0
    out = capsys.readouterr().out
    assert LABEL in out.splitlines()[0]


def test_other_experiments_still_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "fifo-ablation", "--reps", "1", "--out", str(tmp_path)]) == 0
    assert "fifo-ablation" in capsys.readouterr().out


def test_one_rep_is_bad_input(tmp_path: Path) -> None:
    assert main(["experiment", "screen-eval", "--grid", "small", "--reps", "1", "--out", str(tmp_path)]) == 2
