"""Progress: drawn only inside a display, with percent and rate when the total is known."""

from __future__ import annotations

import io

import pytest

from rvguard import progress


@pytest.fixture(autouse=True)
def _no_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "REFRESH", 0.0)


def test_without_a_display_a_task_draws_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert not progress.showing()
    with progress.task("work", total=3) as advance:
        for _ in range(3):
            advance(1)
    assert capsys.readouterr() == ("", "")


def test_a_display_shows_percent_count_and_rate() -> None:
    stream = io.StringIO()
    with progress.display(stream):
        assert progress.showing()
        with progress.task("work", total=4, unit="run") as advance:
            for _ in range(4):
                advance(1)
    text = stream.getvalue()
    assert "work" in text and "100%" in text and "4/4" in text and "run/s" in text
    assert not progress.showing()


def test_an_unknown_total_shows_a_count_and_a_rate() -> None:
    stream = io.StringIO()
    with progress.display(stream), progress.task("lines", unit="line") as advance:
        advance(5)
    assert "5line" in stream.getvalue() and "%" not in stream.getvalue()
    assert "line/s" in stream.getvalue()


def test_short_work_draws_nothing_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "DELAY", 60.0)
    stream = io.StringIO()
    with progress.display(stream), progress.task("work", total=2) as advance:
        advance(2)
    assert stream.getvalue() == ""
