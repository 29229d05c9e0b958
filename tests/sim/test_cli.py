"""``rvguard simulate | experiment | demo`` end to end through the main CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main

SPEC = Path(__file__).resolve().parents[2] / "specs" / "marquee.yaml"


def test_simulate_writes_a_trace_check_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert (
        main(["simulate", str(SPEC), "--duration", "4", "--learner", "lsq", "--seed", "3", "--out", str(out)])
        == 0
    )
    assert out.stat().st_size > 0
    capsys.readouterr()
    assert main(["check", str(out), "--contract", str(SPEC), "--properties", "AF,DR,WF", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["violations"] == []


def test_simulate_unguarded_trace_violates_af(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    args = [
        "simulate",
        str(SPEC),
        "--duration",
        "3",
        "--learner",
        "reject-all",
        "--no-guard",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert main(["check", str(out), "--contract", str(SPEC), "--properties", "AF"]) == 1


def test_simulate_bad_workload_is_input_error(tmp_path: Path) -> None:
    assert main(["simulate", str(SPEC), "--workload", "nope", "--out", str(tmp_path / "t.jsonl")]) == 2


def test_experiment_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "beta-sweep", "--reps", "2", "--out", str(tmp_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["experiment"] == "beta-sweep"
    assert all({"params", "reps", "assured_miss", "assured_miss_ci"} <= set(c) for c in d["conditions"])
    assert (tmp_path / "beta-sweep.png").stat().st_size > 0


def test_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--reps", "2", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "guarded assured miss: max 0.000" in text
    assert str(tmp_path / "beta-sweep.png") in text
