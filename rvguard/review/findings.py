"""What the review reports: per fixed parameter, how often it proved wrong, what it cost, what to set.

A `Finding` is one parameter a trace proved wrong (DESIGN §10, staged adaptation: parameters stay
fixed; every time one proves wrong it is counted with its cost). ``occurrences`` counts the times it
was wrong, ``affected`` the requests that paid for it, ``cost`` breaks that down, and
``suggested`` is the value the trace itself supports (a recalibration to apply by hand, then
re-verify: the review never changes a contract). A report with no finding means no fixed
parameter was caught wrong in this trace, not that the parameters are right.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..bounds import printable

__all__ = ["Finding", "ReviewReport", "render_review"]

#: example rids kept per finding
EXAMPLES = 5


@dataclass(frozen=True)
class Finding:
    """One fixed parameter the trace proved wrong.

    Attributes:
        parameter: the contract field (``service.s_max``, ``service.lower``, ``tenants.<t>.floor``,
            ``headroom.alpha``, ...).
        problem: what the trace showed, in a few words.
        occurrences: how many times the parameter was wrong.
        affected: requests that paid for it.
        cost: the cost broken down (named counts and seconds).
        current: the parameter's value now.
        observed: the figure the trace measured against it.
        suggested: the value the trace supports (``None``: no single value; see ``suggestion``).
        suggestion: one sentence a person can act on.
        examples: a few affected rids (or times), for a look at the trace.
        recalibrate: the contract fields to set, by dotted path, and their values (the suggestion
            in machine form; empty when there is no single value).
    """

    parameter: str
    problem: str
    occurrences: int
    affected: int
    cost: Mapping[str, float]
    current: float
    observed: float
    suggested: float | None
    suggestion: str
    examples: tuple[str, ...] = ()
    recalibrate: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "parameter": self.parameter,
            "problem": self.problem,
            "occurrences": self.occurrences,
            "affected": self.affected,
            "cost": dict(self.cost),
            "current": _finite(self.current),
            "observed": _finite(self.observed),
            "suggested": self.suggested,
            "suggestion": self.suggestion,
            "examples": list(self.examples),
            "recalibrate": dict(self.recalibrate),
        }


@dataclass(frozen=True)
class ReviewReport:
    """Everything `rvguard review` found in one trace (and its alert log)."""

    trace: str
    requests: int
    span: float
    findings: tuple[Finding, ...]
    checked: tuple[str, ...]
    alerts: Mapping[str, int] = field(default_factory=dict)
    log: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def holds(self) -> bool:
        """No fixed parameter was caught wrong."""
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object."""
        return {
            "trace": self.trace,
            "holds": self.holds,
            "requests": self.requests,
            "span": self.span,
            "checked": list(self.checked),
            "findings": [f.to_dict() for f in self.findings],
            "log": self.log,
            "alerts": dict(self.alerts),
            "notes": list(self.notes),
        }


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _finding_lines(f: Finding) -> list[str]:
    cost = ", ".join(f"{k} {_num(v)}" for k, v in f.cost.items())
    lines = [
        f"* {f.parameter}: {f.problem}",
        f"    wrong {f.occurrences} time(s); {f.affected} request(s) affected ({cost})",
        f"    current {_num(f.current)}, observed {_num(f.observed)}, suggested {_num(f.suggested)}",
        f"    {f.suggestion}",
    ]
    if f.examples:
        lines.append("    e.g. " + ", ".join(printable(x) for x in f.examples))
    return lines


def render_review(report: ReviewReport) -> str:
    """The text report: one block per finding, then the alert log's counts and the notes."""
    head = f"review of {printable(report.trace)}: {report.requests} requests over {report.span:.4g} s"
    lines = [head, "checked: " + ", ".join(report.checked)]
    if report.holds:
        lines.append("no fixed parameter proved wrong in this trace")
    for f in report.findings:
        lines += _finding_lines(f)
    if report.log is not None:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.alerts.items())) or "none"
        lines.append(f"alert log {printable(report.log)}: {counts}")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
