"""`rvguard review`: staged adaptation's report — how often each fixed parameter proved wrong.

DESIGN §10: parameters stay fixed; every time one proves wrong in a recorded trace it is counted
with what it cost, and the review suggests the recalibration (to apply by hand; it never edits a
contract). The checks, one module each:

* `rvguard.review.envelope` — services above the ceiling (``s_max``, ``s_max_opp``) and below L;
* `rvguard.review.capacity` — windows whose measured capacity fell below Σ B (B/W);
* `rvguard.review.headroom` — redline triggers the headroom did not confirm (α), when the trace
  has ``sample`` events and a redline configuration is given;

plus the alert log the live guard wrote (`rvguard.review.alerts`). A report with no finding says
no parameter was caught wrong in this trace: a report, never a guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..contract import Contract, contract_from_mapping
from ..enforce.redline import RedlineConfig
from ..errors import TraceError
from ..events import Event
from ..io import iter_records
from .alerts import count_alerts
from .capacity import floor_capacity
from .envelope import above_ceiling, below_lower
from .findings import Finding, ReviewReport, render_review
from .headroom import false_triggers
from .records import TraceSummary, collect

__all__ = ["Finding", "ReviewReport", "recalibrated", "render_review", "review_events", "review_trace"]

CHECKED: tuple[str, ...] = ("service ceiling (s_max, s_max_opp)", "service lower bound L", "capacity B/W")


def _events(path: str) -> Iterable[Event]:
    for _, item in iter_records(path):
        if isinstance(item, TraceError):
            raise item
        yield item


def review_events(
    events: Iterable[Event],
    contract: Contract,
    *,
    trace: str = "<events>",
    redline: RedlineConfig | None = None,
    confirm: int = 2,
) -> tuple[ReviewReport, TraceSummary]:
    """Review events already read (tests, the simulator); the summary is returned for reuse.

    ``redline`` is the configuration the guard ran its redline with (the contract's ``headroom``
    block); ``confirm`` the raw samples below h_min that confirm a trigger.
    """
    summary = collect(events, contract)
    recs = list(summary.requests.values())
    findings: list[Finding] = [*above_ceiling(recs, contract), *below_lower(recs, contract)]
    findings += floor_capacity(recs, contract, summary.last)
    checked, notes = CHECKED, []
    if summary.samples and redline is not None:
        checked += ("redline triggers (alpha)",)
        findings += false_triggers(summary.samples, summary.demotions, redline, summary.last, confirm=confirm)
    elif summary.samples:
        notes.append("the trace has headroom samples but no redline configuration: triggers not reviewed")
    if summary.orphans:
        notes.append(f"{summary.orphans} events of rids that never arrived were left out (see rvguard check)")
    span = 0.0 if not summary.events else summary.last - summary.first
    report = ReviewReport(trace, len(recs), span, tuple(findings), checked, notes=tuple(notes))
    return report, summary


def review_trace(
    path: str,
    contract: Contract,
    *,
    log: str | Path | None = None,
    redline: RedlineConfig | None = None,
    confirm: int = 2,
) -> ReviewReport:
    """Review a trace file (and the guard's alert log, when given); see `review_events`.

    Raises:
        TraceError: the first bad record, located (review reads strictly).
        OSError: a file cannot be read.
    """
    report, _ = review_events(_events(path), contract, trace=path, redline=redline, confirm=confirm)
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
