"""Plain-text tables for people; `--json` output is built by each result's ``to_dict``.

Text that comes from a trace (rids, reasons, field names, the file name) is
shown through `rvguard.bounds.printable`: a crafted rid must not be able to
move the cursor, colour the terminal or print a line of its own (a fake
``verdict:``), so control and format characters, line separators and lone
surrogates are written as escapes, and a backslash as two.
"""

from __future__ import annotations

from collections.abc import Sequence

from .bounds import printable
from .check import CLAIMS, P95_NOTE, BadLine, CheckReport
from .monitors import Metrics

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
    return printable(str(value))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


def _verdicts(report: CheckReport) -> list[str]:
    counts = dict.fromkeys(report.properties, 0)
    for v in report.violations:
        counts[v.property] = counts.get(v.property, 0) + 1
    rows = [
        (p, "holds so far" if counts[p] == 0 else "VIOLATED", counts[p], CLAIMS.get(p, "user-defined"))
        for p in report.properties
    ]
    out = ["", table(["property", "verdict", "violations", "what it means"], rows)]
    out += _attributed(report)
    if report.violations:
        shown = [(v.property, v.rid, v.t, v.detail) for v in report.violations[:_MAX_VIOLATIONS]]
        out += ["", table(["property", "rid", "t (s)", "detail"], shown)]
        if len(report.violations) > _MAX_VIOLATIONS:
            out.append(f"... and {len(report.violations) - _MAX_VIOLATIONS} more (use --json for all)")
    return out


def _attributed(report: CheckReport) -> list[str]:
    """SF's misses by cause and AF's declared exceptions: counted apart from violations, never silent."""
    out: list[str] = []
    if "SF" in report.properties:
        sf = report.sf_attribution()
        out += [
            "",
            f"SF misses: {sf['guard_fault']} guard fault, {sf['precondition_broken']} precondition broken, "
            f"{sf['client_fault']} client fault (only guard faults fail SF)",
        ]
    if report.attributed:
        shown = [
            (a.violation.property, a.violation.rid, a.violation.t, a.cause, a.condition, a.since, a.source)
            for a in report.attributed[:_MAX_VIOLATIONS]
        ]
        out += ["", table(["property", "rid", "t (s)", "cause", "condition", "since", "evidence"], shown)]
        if len(report.attributed) > _MAX_VIOLATIONS:
            out.append(
                f"... and {len(report.attributed) - _MAX_VIOLATIONS} more attributed (use --json for all)"
            )
    return out


def _p95(m: Metrics) -> str:
    p = m.assured_sojourn_p95
    if p.judged == 0:
        return "-"
    point = "unbounded" if p.p95_unbounded else _fmt(p.p95)
    if p.windows < 2:
        return f"{point} (n={p.judged}, one window: no interval)"
    hi = "unbounded" if p.ci_high_unbounded else _fmt(p.ci_high)
    return f"{point} [{_fmt(p.ci_low)}, {hi}] (n={p.judged}, {p.windows} windows)"


def _metrics(m: Metrics) -> list[str]:
    below = m.service_assured.below_lower + m.service_opportunistic.below_lower
    above = m.service_assured.above_ceiling + m.service_opportunistic.above_ceiling
    rows = [
        ("floor-entitled requests", m.entitled),
        ("entitled admitted and on time", m.entitled_attained),
        ("floor attainment", _pct(m.floor_attainment)),
        ("assured miss (admitted basis)", _pct(m.admitted_miss)),
        ("assured unmet (offered basis)", _pct(m.offered_unmet)),
        ("max assured backlog Q_A", m.max_assured_backlog),
        ("open requests at trace end", m.open_requests),
        ("effective utilisation", _pct(m.utilisation)),
        ("assured service min / max (s)", f"{_fmt(m.service_assured.min)} / {_fmt(m.service_assured.max)}"),
        ("services below L / above s_max", f"{below} / {above}"),
        ("assured P95 sojourn (s) [95 % CI]", _p95(m)),
    ]
    return ["", table(["metric", "value"], rows)]


def _where(b: BadLine) -> str:
    """``line 7``, or ``partition:7`` for a partitioned trace."""
    return f"{printable(b.path)}:{b.line}" if b.path else f"line {b.line}"


def _bad_lines(report: CheckReport) -> list[str]:
    if not report.bad_lines:
        return []
    out = ["", f"{len(report.bad_lines)} bad line(s) left out (--lenient):"]
    out += [
        f"  {_where(b)}: {printable(b.field or 'record')}: {printable(b.reason)}"
        for b in report.bad_lines[:_MAX_VIOLATIONS]
    ]
    if len(report.bad_lines) > _MAX_VIOLATIONS:
        out.append(f"  ... and {len(report.bad_lines) - _MAX_VIOLATIONS} more (use --json for all)")
    return out


def _lost(report: CheckReport) -> list[str]:
    if not report.lost:
        return []
    out = ["", f"{len(report.lost)} request(s) lost at restart (open when the gateway stopped):"]
    out += [
        f"  {printable(x.rid)} (in {printable(x.path)}), closed at t={x.t:g}"
        for x in report.lost[:_MAX_VIOLATIONS]
    ]
    if len(report.lost) > _MAX_VIOLATIONS:
        out.append(f"  ... and {len(report.lost) - _MAX_VIOLATIONS} more (use --json for all)")
    return out


def _phase(report: CheckReport) -> list[str]:
    ph = report.phase
    if ph is None or not ph.rows:
        return []
    rows = [
        (r.phase, r.entitled, r.attained, _pct(r.attainment), r.newly_entitled_rejections) for r in ph.rows
    ]
    headers = ["phase φ (s)", "entitled", "attained", "attainment", "rejects newly entitled"]
    worst = f"worst-case attainment {_pct(ph.worst_attainment)} at φ = {_fmt(ph.worst_phase)} s"
    return ["", table(headers, rows), worst]


def _fleet(report: CheckReport) -> list[str]:
    f = report.fleet
    if f is None:
        return []
    most = ", ".join(f"{t} {v:g}" for t, v in sorted(f.max_credits.items())) or "none"
    return [
        f"fleet: most floor credit admitted in one window: {most} (over {f.windows} tenant-windows); "
        f"{f.pooled_arrivals} arrivals judged in the pool's order, {f.entitled_by_pool} of them entitled"
    ]


def render_check(report: CheckReport) -> str:
    """The readable report of `rvguard check`."""
    m = report.metrics
    size = f"{m.events:,} events, {m.requests:,} requests, {report.seconds:.2f} s"
    head = f"trace: {printable(report.trace)}  ({size})"
    verdict = "verdict: " + ("no violation so far" if report.holds else "VIOLATED")
    out = [
        head,
        *_verdicts(report),
        *_metrics(m),
        *_bad_lines(report),
        *_lost(report),
        *_phase(report),
        *_fleet(report),
        "",
        P95_NOTE,
        verdict,
    ]
    return "\n".join(out)
