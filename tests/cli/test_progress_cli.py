"""Long commands show progress on a terminal, never with ``--json`` nor into a pipe."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from rvguard import progress
from rvguard.cli import main
from rvguard.screen.evaluate import evaluate, small_grid

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "marquee.yaml")


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _no_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "REFRESH", 0.0)


def _stderr(argv: list[str], err: io.StringIO) -> str:
    """What ``main(argv)`` writes on ``err`` as its stderr (it must not fail on input)."""
    with contextlib.redirect_stderr(err):
        assert main(argv) in (0, 1)
    return err.getvalue()


def test_an_experiment_shows_its_runs(tmp_path: Path) -> None:
    text = _stderr(["experiment", "fifo-ablation", "--reps", "1", "--out", str(tmp_path)], Terminal())
    assert "runs" in text and "100%" in text and "6/6" in text  # 3 offered loads × priority, FIFO


def test_json_turns_progress_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["experiment", "fifo-ablation", "--reps", "1", "--out", str(tmp_path), "--json"]
    assert _stderr(argv, Terminal()) == ""
    assert json.loads(capsys.readouterr().out)["experiment"] == "fifo-ablation"


def test_a_pipe_gets_no_progress(tmp_path: Path) -> None:
    argv = ["simulate", SPEC, "--duration", "30", "--out", str(tmp_path / "t.jsonl")]
    assert _stderr(argv, io.StringIO()) == ""


def test_simulate_shows_simulated_time(tmp_path: Path) -> None:
    argv = ["simulate", SPEC, "--duration", "120", "--rate", "30", "--out", str(tmp_path / "t.jsonl")]
    text = _stderr(argv, Terminal())
    assert "simulating" in text and "s/s" in text


def test_a_big_check_shows_percent_and_rate(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    _stderr(["simulate", SPEC, "--duration", "120", "--rate", "30", "--out", str(trace)], io.StringIO())
    lines = len(trace.read_text().splitlines())
    assert lines > 0x1000  # the bar advances every 4096 lines
    text = _stderr(["check", str(trace), "--contract", SPEC], Terminal())
    assert "checking t.jsonl" in text and f"/{lines} [" in text and "line/s" in text
    assert re.search(r"[1-9]\d?%\|", text)  # a percent of the whole file


def test_screen_eval_shows_its_configurations() -> None:
    stream = io.StringIO()
    with progress.display(stream):
        evaluate(small_grid()[:2], reps=2, duration=5.0)
    assert "configurations" in stream.getvalue() and "2/2" in stream.getvalue()
