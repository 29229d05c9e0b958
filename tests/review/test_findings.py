"""The review's report: text and JSON forms, a non-finite figure shown as none."""

from __future__ import annotations

import json
import math

from rvguard.review.findings import Finding, ReviewReport, render_review


def _finding(**over: object) -> Finding:
    base: dict[str, object] = {
        "parameter": "service.s_max",
        "problem": "services above the ceiling",
        "occurrences": 2,
        "affected": 2,
        "cost": {"late": 1},
        "current": 0.5,
        "observed": math.nan,
        "suggested": 0.7,
        "suggestion": "raise it",
        "examples": ("r1", "r\x1b2"),
        "recalibrate": {"service.s_max": 0.7},
    }
    base.update(over)
    return Finding(**base)  # type: ignore[arg-type]


def test_json_form_is_strict_json() -> None:
    report = ReviewReport("t.jsonl", 3, 1.5, (_finding(),), ("ceiling",), {"service": 1}, "a.jsonl")
    doc = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert doc["holds"] is False and doc["findings"][0]["observed"] is None
    assert doc["findings"][0]["recalibrate"] == {"service.s_max": 0.7} and doc["alerts"] == {"service": 1}


def test_text_form_escapes_what_came_from_the_trace() -> None:
    text = render_review(ReviewReport("t.jsonl", 3, 1.5, (_finding(),), ("ceiling",), log="a.jsonl"))
    assert "wrong 2 time(s); 2 request(s) affected (late 1)" in text
    assert "\x1b" not in text and "r\\x1b2" in text
    assert "alert log a.jsonl: none" in text
    clean = render_review(ReviewReport("t.jsonl", 0, 0.0, (), ("ceiling",)))
    assert "no fixed parameter proved wrong" in clean
