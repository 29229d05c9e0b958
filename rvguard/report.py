"""Plain-text tables for people; `--json` output is built by each result's ``to_dict``."""

from __future__ import annotations

from collections.abc import Sequence

from .check import P95_NOTE, CheckReport

__all__ = ["render_check", "table"]

_MAX_VIOLATIONS = 20


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A left-aligned text table with a rule under the header."""
    cells = [[str(h) for h in headers], *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


def render_check(report: CheckReport) -> str:
    """The readable report of `rvguard check`."""
    m = report.metrics
    out = [f"trace: {report.trace}  ({m.events:,} events, {m.requests:,} requests, {report.seconds:.2f} s)"]
    counts = {p: 0 for p in report.properties}
    for v in report.violations:
        counts[v.property] = counts.get(v.property, 0) + 1
    from .check import CLAIMS

    out += [
        "",
        table(
            ["property", "verdict", "violations", "what it means"],
            [
                (
                    p,
                    "holds so far" if counts[p] == 0 else "VIOLATED",
                    counts[p],
                    CLAIMS.get(p, "user-defined"),
                )
                for p in report.properties
            ],
        ),
    ]
    if report.violations:
        rows = [(v.property, v.rid, v.t, v.detail) for v in report.violations[:_MAX_VIOLATIONS]]
        out += ["", table(["property", "rid", "t (s)", "detail"], rows)]
        if len(report.violations) > _MAX_VIOLATIONS:
            out.append(f"... and {len(report.violations) - _MAX_VIOLATIONS} more (use --json for all)")
    out += [
        "",
        table(
            ["metric", "value"],
            [
                ("floor-entitled requests", m.entitled),
                ("entitled admitted and on time", m.entitled_attained),
                ("floor attainment", _pct(m.floor_attainment)),
                ("assured miss (admitted basis)", _pct(m.admitted_miss)),
                ("assured unmet (offered basis)", _pct(m.offered_unmet)),
                ("max assured backlog Q_A", m.max_assured_backlog),
                ("open requests at trace end", m.open_requests),
                ("effective utilisation", _pct(m.utilisation)),
                (
                    "assured service min / max (s)",
                    f"{_fmt(m.service_assured.min)} / {_fmt(m.service_assured.max)}",
                ),
                (
                    "services below L / above s_max",
                    f"{m.service_assured.below_lower + m.service_opportunistic.below_lower}"
                    f" / {m.service_assured.above_ceiling + m.service_opportunistic.above_ceiling}",
                ),
            ],
        ),
    ]
    if report.bad_lines:
        out += ["", f"{len(report.bad_lines)} bad line(s) left out (--lenient):"]
        out += [
            f"  line {b.line}: {b.field or 'record'}: {b.reason}" for b in report.bad_lines[:_MAX_VIOLATIONS]
        ]
        if len(report.bad_lines) > _MAX_VIOLATIONS:
            out.append(f"  ... and {len(report.bad_lines) - _MAX_VIOLATIONS} more (use --json for all)")
    if report.phase is not None and report.phase.rows:
        ph = report.phase
        out += [
            "",
            table(
                ["phase φ (s)", "entitled", "attained", "attainment", "rejects newly entitled"],
                [
                    (r.phase, r.entitled, r.attained, _pct(r.attainment), r.newly_entitled_rejections)
                    for r in ph.rows
                ],
            ),
            f"worst-case attainment {_pct(ph.worst_attainment)} at φ = {_fmt(ph.worst_phase)} s",
        ]
    out += ["", P95_NOTE, "verdict: " + ("no violation so far" if report.holds else "VIOLATED")]
    return "\n".join(out)
