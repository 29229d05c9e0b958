"""`rvguard review`: staged adaptation's report — how often each fixed parameter proved wrong.

DESIGN §10: parameters stay fixed; every time one proves wrong in a recorded trace it is counted
with what it cost, and the review suggests the recalibration (to apply by hand; it never edits a
contract). The checks, one module each:

* `rvguard.review.envelope` — services above the ceiling (``s_max``, ``s_max_opp``) and below L;
* `rvguard.review.capacity` — floor-admitted arrivals not served within their window (B/W);

plus the alert log the live guard wrote (`rvguard.review.alerts`). A report with no finding says
no parameter was caught wrong in this trace: a report, never a guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..contract import Contract, contract_from_mapping
from ..errors import TraceError
from ..events import Event
from ..io import iter_records
from .alerts import count_alerts
from .capacity import floor_capacity
from .envelope import above_ceiling, below_lower
from .findings import Finding, ReviewReport, render_review
from .records import TraceSummary, collect

__all__ = ["Finding", "ReviewReport", "recalibrated", "render_review", "review_events", "review_trace"]

CHECKED = ("service ceiling (s_max, s_max_opp)", "service lower bound L", "capacity B/W")


def _events(path: str) -> Iterable[Event]:
    for _, item in iter_records(path):
        if isinstance(item, TraceError):
            raise item
        yield item


def review_events(
    events: Iterable[Event], contract: Contract, *, trace: str = "<events>"
) -> tuple[ReviewReport, TraceSummary]:
    """Review events already read (tests, the simulator); the summary is returned for reuse."""
    summary = collect(events, contract)
    recs = list(summary.requests.values())
    findings: list[Finding] = [*above_ceiling(recs, contract), *below_lower(recs, contract)]
    findings += floor_capacity(recs, contract, summary.last)
    notes = []
    if summary.orphans:
        notes.append(f"{summary.orphans} events of rids that never arrived were left out (see rvguard check)")
    span = 0.0 if not summary.events else summary.last - summary.first
    report = ReviewReport(trace, len(recs), span, tuple(findings), CHECKED, notes=tuple(notes))
    return report, summary


def review_trace(path: str, contract: Contract, *, log: str | Path | None = None) -> ReviewReport:
    """Review a trace file (and the guard's alert log, when given).

    Raises:
        TraceError: the first bad record, located (review reads strictly).
        OSError: a file cannot be read.
    """
    report, _ = review_events(_events(path), contract, trace=path)
    if log is None:
        return report
    alerts = count_alerts(log)
    return ReviewReport(
        report.trace,
        report.requests,
        report.span,
        report.findings,
        report.checked,
        alerts,
        str(log),
        report.notes,
    )


def recalibrated(contract: Contract, findings: Iterable[Finding]) -> Contract:
    """``contract`` with every finding's ``recalibrate`` fields set (the manual recalibration step).

    A constant ``service.lower`` is replaced whole; ``service.lower.base``/``per_token`` set the
    linear form's coefficients.

    Raises:
        SpecError: the result is not a valid contract (e.g. L above the new s_max).
    """
    data = contract.model_dump(mode="json")
    for finding in findings:
        for path, value in finding.recalibrate.items():
            keys = path.split(".")
            node = data
            for key in keys[:-1]:
                node = node[key]
            node[keys[-1]] = {"base": value, "per_token": 0.0} if path == "service.lower" else value
    return contract_from_mapping(data)
