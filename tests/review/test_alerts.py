"""The alert log review reads: alerts by kind, gateway log lines, other lines counted, bad lines refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.enforce.alertlog import AlertLog
from rvguard.enforce.watch import Alert
from rvguard.errors import TraceFormatError
from rvguard.review.alerts import count_alerts


def test_what_alertlog_writes_review_counts(tmp_path: Path) -> None:
    log = AlertLog(tmp_path / "a.jsonl")
    for kind in ("service", "capacity", "service", "clear"):
        log(Alert(1.0, kind, "why", 2.0, 1.0))
    assert log.written == 4
    assert count_alerts(log.path) == {"service": 2, "capacity": 1, "clear": 1}


def test_a_line_that_is_not_an_object_is_refused_with_its_number(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "service"}\n\n{"kind": \n')
    with pytest.raises(TraceFormatError) as err:
        count_alerts(bad)
    assert err.value.line == 3
