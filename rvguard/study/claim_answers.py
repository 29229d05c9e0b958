"""How a result document answers each claim of the reference study (`rvguard.study.claims`).

Each function reads the experiments' ``--json`` documents (`Docs`: name →
document; an engine run's documents have the same form) and returns the
table cell and whether the shape the study draws holds (None: the
document is missing). They read documents, never run anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "Answer",
    "Docs",
    "agnostic",
    "agnostic_guard",
    "attainment",
    "backlog",
    "bands",
    "calibration",
    "calibration_pair",
    "capacity",
    "compound",
    "cond",
    "conds",
    "corner_backlog",
    "deadline_sweep",
    "demote",
    "dr",
    "fifo",
    "floor_sweep",
    "fmt",
    "gaie",
    "marquee_guard",
    "max_of",
    "not_run",
    "opp_paired",
    "phase",
    "poisson_variant",
    "rate_limit",
    "replay",
    "screen",
    "screen_held_out",
    "screen_overflag",
    "screen_overload",
    "server_priority",
    "service_max",
    "slices",
    "sojourn_and_wait",
    "tokens",
    "unguarded_beta",
]

Docs = Mapping[str, Mapping[str, Any]]
Shape = bool | str | None  # True holds, False differs, "partly", None not measured
Answer = tuple[str, Shape]  # cell text, shape


def fmt(x: Any, digits: int = 3) -> str:
    """A number as the table prints it ("—" for none)."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def conds(doc: Mapping[str, Any], **params: Any) -> list[Mapping[str, Any]]:
    """The conditions of ``doc`` whose params include every ``params`` item."""
    return [c for c in doc.get("conditions", []) if all(c["params"].get(k) == v for k, v in params.items())]


def cond(doc: Mapping[str, Any], **params: Any) -> Mapping[str, Any] | None:
    """The first matching condition (None when the document has none)."""
    found = conds(doc, **params)
    return found[0] if found else None


def _get(docs: Docs, name: str) -> Mapping[str, Any] | None:
    return docs.get(name)


def _guarded_beta(docs: Docs, key: str) -> list[Any]:
    doc = _get(docs, "beta-sweep")
    if doc is None:
        return []
    return [c[key] for c in conds(doc, guard=True, learner="lsq", assured="paced")]


def marquee_guard(docs: Docs) -> Answer:
    doc = _get(docs, "beta-sweep")
    if doc is None:
        return "—", None
    cs = conds(doc, guard=True, learner="lsq", assured="paced")
    miss = max(c["assured_miss"] or 0.0 for c in cs)
    rejected = sum(c["rejected"] for c in cs)
    runs = sum(c["reps"] for c in cs)
    missed_runs = sum(c["runs_with_miss"] for c in cs)
    admitted = sum(c["admitted"] for c in cs)
    text = f"max miss {fmt(miss)}; {missed_runs}/{runs} runs with a miss; "
    text += f"{rejected}/{admitted + rejected} rejected"
    return text, miss == 0.0 and rejected == 0


def poisson_variant(docs: Docs) -> Answer:
    doc = _get(docs, "beta-sweep")
    if doc is None:
        return "—", None
    cs = conds(doc, guard=True, learner="lsq", assured="poisson")
    miss = max(c["assured_miss"] or 0.0 for c in cs)
    unmet = max(c["offered_unmet"] or 0.0 for c in cs)
    return f"miss {fmt(miss)}, offered-basis unmet {fmt(unmet)} (burst excess rejected)", miss == 0.0


def unguarded_beta(docs: Docs) -> Answer:
    doc = _get(docs, "beta-sweep")
    if doc is None:
        return "—", None
    by = {
        c["params"]["beta"]: c["assured_miss"]
        for c in conds(doc, guard=False, learner="lsq", assured="paced")
    }
    text = ", ".join(f"β={b:g}: {fmt(m)}" for b, m in sorted(by.items()))
    high = [b for b, m in by.items() if (m or 0.0) >= 0.8]
    if len(high) == len(by):
        return text, True
    return text, "partly" if 0.0 in high else False


def agnostic(beta: float) -> Callable[[Docs], Answer]:
    def answer(docs: Docs) -> Answer:
        doc = _get(docs, "beta-sweep")
        c = (
            None
            if doc is None
            else cond(doc, guard=False, learner="lsq-agnostic", beta=beta, assured="paced")
        )
        if c is None:
            return "—", None
        per_run = c["offered"] / max(c["reps"], 1)
        admitted = c["admitted"] / max(c["reps"], 1)
        text = f"admits {admitted:.0f}/{per_run:.0f}, miss {fmt(c['assured_miss'])}, "
        text += f"unmet {fmt(c['offered_unmet'])}"
        if beta == 0.0:
            return text, (c["assured_miss"] or 0.0) > 0.8 and c["rejected"] == 0
        return text, c["rejected"] > 0 and (c["offered_unmet"] or 0.0) > (c["assured_miss"] or 0.0)

    return answer


def agnostic_guard(docs: Docs) -> Answer:
    doc = _get(docs, "beta-sweep")
    if doc is None:
        return "—", None
    cs = conds(doc, guard=True, learner="lsq-agnostic", assured="paced")
    miss = max(c["assured_miss"] or 0.0 for c in cs)
    return f"max miss {fmt(miss)}", miss == 0.0


def max_of(experiment: str, key: str, scale_ms: bool, **params: Any) -> Callable[[Docs], Answer]:
    def answer(docs: Docs) -> Answer:
        doc = _get(docs, experiment)
        cs = [] if doc is None else [c for c in conds(doc, **params) if c.get(key) is not None]
        if not cs:
            return "—", None
        v = max(c[key] for c in cs)
        return (f"{v * 1000:.0f} ms" if scale_ms else fmt(v)), True

    return answer


def sojourn_and_wait(docs: Docs) -> Answer:
    worst = _guarded_beta(docs, "assured_sojourn_max")
    waits = [w for w in _guarded_beta(docs, "assured_wait_mean") if w is not None]
    if not worst:
        return "—", None
    return f"worst {max(worst) * 1000:.0f} ms; mean wait {1000 * sum(waits) / len(waits):.0f} ms", max(
        worst
    ) < 1.82


def service_max(docs: Docs) -> Answer:
    hi = _guarded_beta(docs, "assured_service_max")
    above = _guarded_beta(docs, "above_ceiling_fraction")
    if not hi:
        return "—", None
    return f"max {max(hi) * 1000:.0f} ms; above s_max {fmt(max(above))}", max(hi) <= 0.66


def backlog(docs: Docs) -> Answer:
    q = _guarded_beta(docs, "max_assured_backlog")
    return ("—", None) if not q else (f"max Q_A {max(q)} (B = 6)", max(q) <= 6)


def corner_backlog(docs: Docs) -> Answer:
    doc = _get(docs, "deadline-sweep")
    c = None if doc is None else cond(doc, arm="guard", deadline=1.856)
    return (
        ("—", None)
        if c is None
        else (f"max Q_A {c['max_assured_backlog']} (B = 4)", c["max_assured_backlog"] <= 4)
    )


def opp_paired(docs: Docs) -> Answer:
    doc = _get(docs, "beta-sweep")
    c = None if doc is None else cond(doc, guard=True, learner="lsq", beta=0.0, assured="paced")
    return (
        ("—", None)
        if c is None
        else (f"opportunistic miss {fmt(c['opp_miss'])} (β = 0)", (c["opp_miss"] or 0) > 0.5)
    )


def fifo(docs: Docs) -> Answer:
    doc = _get(docs, "fifo-ablation")
    if doc is None:
        return "—", None
    parts, holds, paired = [], True, []
    for c in conds(doc, dispatch="fifo"):
        prio = cond(doc, dispatch="priority", opp_rate=c["params"]["opp_rate"])
        if prio is None:  # its priority arm left out (an engine run's broken or contended condition)
            continue
        paired.append(c)
        parts.append(f"ρ̂ {fmt(c.get('rho_total'), 2)}: FIFO {fmt(c['assured_miss'])} vs priority "
                     f"{fmt(prio['assured_miss'])}")  # fmt: skip
        if (prio["assured_miss"] or 0.0) > 0.05:  # priority near zero where FIFO drowns
            holds = False
    if not paired:
        return "— (no held condition)", None
    overloaded = [c for c in paired if (c.get("rho_total") or 0) > 1.1]
    holds = holds and bool(overloaded) and max(c["assured_miss"] or 0.0 for c in overloaded) > 0.5
    return "; ".join(parts), holds


def calibration(key: str, unit: str = "ms", study: float | None = None) -> Callable[[Docs], Answer]:
    def answer(docs: Docs) -> Answer:
        doc = _get(docs, "calibration")
        if doc is None or key not in doc["measured"]:
            return "—", None
        v = doc["measured"][key]
        target = doc["targets"].get(key, study)
        text = f"{v * 1000:.0f} ms" if unit == "ms" else (f"{100 * v:.1f} %" if unit == "%" else f"{v:.2f}/s")
        if not target:
            return text, True
        err = (v - target) / target
        text += f" ({100 * err:+.0f} %)"
        return text, True if abs(err) <= 0.1 else ("partly" if abs(err) <= 0.25 else False)

    return answer


def _worst(*shapes: Shape) -> Shape:
    if None in shapes:
        return None
    if False in shapes:
        return False
    return "partly" if "partly" in shapes else True


def calibration_pair(first: str, second: str, sep: str) -> Callable[[Docs], Answer]:
    """Two calibration points in one cell; the shape is the worse of the two."""

    def answer(docs: Docs) -> Answer:
        (t1, s1), (t2, s2) = calibration(first)(docs), calibration(second)(docs)
        shape = _worst(s1, s2)
        return ("—", None) if shape is None else (f"{t1}{sep}{t2}", shape)

    return answer


def deadline_sweep(docs: Docs) -> Answer:
    doc = _get(docs, "deadline-sweep")
    if doc is None:
        return "—", None
    by = {c["params"]["deadline"]: c for c in conds(doc, arm="guard")}
    rho = [c["rho_eff"] for c in by.values() if c["rho_eff"] is not None]
    text = f"ρ_eff {fmt(sum(rho) / len(rho), 2)}; " + ", ".join(
        f"{d * 1000:.0f} ms: {fmt(c['assured_miss'])}" for d, c in sorted(by.items())
    )
    if len(by) < 3:  # on the engine: the shorter deadlines break the contract's own backlog bound
        return text + f" ({len(by)} deadline(s) with held preconditions: no sweep to judge)", None
    misses = [by[d]["assured_miss"] or 0.0 for d in sorted(by)]
    holds = misses == sorted(misses, reverse=True) and misses[-1] == 0.0 and misses[0] > 0.3
    return text, holds


def floor_sweep(docs: Docs) -> Answer:
    doc = _get(docs, "floor-sweep")
    if doc is None:
        return "—", None
    cs = sorted(conds(doc, arm="guard"), key=lambda c: c["params"]["floor"])
    text = ", ".join(
        f"B={c['params']['floor']} (ρ_eff {fmt(c['rho_eff'], 2)}): {fmt(c['assured_miss'])}" for c in cs
    )
    below = [c for c in cs if (c["rho_eff"] or 0) < 1.0]
    above = [c for c in cs if (c["rho_eff"] or 0) > 1.1]
    holds = (
        all(c["assured_miss"] == 0.0 for c in below)
        and bool(above)
        and min(c["assured_miss"] or 0 for c in above) > 0.3
    )
    return text, holds


def compound(docs: Docs) -> Answer:
    doc = _get(docs, "stress")
    if doc is None:
        return "—", None
    top = max(c["params"]["floor"] for c in doc["conditions"])
    by = {c["params"]["deadline"]: c for c in conds(doc, floor=top)}
    text = f"B={top} (ρ_eff {fmt(next(iter(by.values()))['rho_eff'], 2)}): " + ", ".join(
        f"{d * 1000:.0f} ms: {fmt(c['assured_miss'])}" for d, c in sorted(by.items(), reverse=True)
    )
    misses = [by[d]["assured_miss"] or 0.0 for d in sorted(by, reverse=True)]
    return text, misses == sorted(misses) and misses[0] > 0.3


def dr(docs: Docs) -> Answer:
    doc = _get(docs, "stress")
    if doc is None:
        return "—", None
    cs = doc["conditions"]
    firing = sum(1 for c in cs if c.get("dr_drops_assured", 0) > 0)
    bad = sum(c["dr_wf_violations"] for c in cs)
    text = f"fires on assured in {firing} of {len(cs)} guard-DR cells; DR/WF violations {bad}"
    if bad:
        return text, False
    return text, True if firing <= len(cs) / 4 else "partly"  # no false drop holds; near-inert does not


def replay(docs: Docs) -> Answer:
    doc = _get(docs, "trace-replay")
    if doc is None:
        return "—", None
    parts, holds = [], True
    for trace in ("mooncake", "azure_conv", "azure_code"):
        g, a = cond(doc, trace=trace, arm="guard-reject"), cond(doc, trace=trace, arm="admit-all")
        if g is None or a is None:
            continue
        parts.append(f"{trace}: {fmt(g['offered_unmet'])} vs {fmt(a['offered_unmet'])}")
        holds = holds and (g["offered_unmet"] or 0) < (a["offered_unmet"] or 0) and g["assured_miss"] == 0.0
    return "; ".join(parts), holds


def attainment(docs: Docs) -> Answer:
    doc = _get(docs, "trace-replay")
    if doc is None:
        return "—", None
    g = [c["floor_attainment"] for c in conds(doc, arm="guard-reject")]
    a = [c["floor_attainment"] for c in conds(doc, arm="admit-all")]
    return f"guard {fmt(min(g))}–{fmt(max(g))}; admit-all {fmt(min(a))}–{fmt(max(a))}", min(g) == 1.0 and max(
        a
    ) < 0.5


def phase(docs: Docs) -> Answer:
    bs, tr = _get(docs, "beta-sweep"), _get(docs, "trace-replay")
    if bs is None or tr is None:
        return "—", None
    marquee = [c["phase_worst_attainment"] for c in conds(bs, guard=True, learner="lsq", assured="paced")]
    worst = {c["params"]["trace"]: c["phase_worst_attainment"] for c in conds(tr, arm="guard-reject")}
    text = f"marquee worst {fmt(min(marquee))}; replays " + ", ".join(
        f"{t} {fmt(v, 2)}" for t, v in worst.items()
    )
    return text, min(marquee) == 1.0 and min(worst.values()) < 1.0


def slices(docs: Docs) -> Answer:
    doc = _get(docs, "slices")
    if doc is None:
        return "—", None
    g = conds(doc, arm="guard")
    a = conds(doc, arm="admit-all")
    sp = doc["spearman"]
    cvs = [c["params"]["cv"] for c in g]
    text = (
        f"CV {min(cvs):.2f}–{max(cvs):.2f}: guard {fmt(min(c['offered_unmet'] for c in g), 2)}–"
        f"{fmt(max(c['offered_unmet'] for c in g), 2)}, "
        f"admit-all {fmt(min(c['offered_unmet'] for c in a), 2)}–"
        f"{fmt(max(c['offered_unmet'] for c in a), 2)}; Spearman ρ {sp['rho']:.2f}, p {sp['p']:.2f}"
    )
    if max(c["offered_unmet"] for c in g) >= min(c["offered_unmet"] for c in a):
        return text, False
    return text, True if sp["p"] > 0.05 else "partly"


def demote(docs: Docs) -> Answer:
    doc = _get(docs, "demote-vs-reject")
    if doc is None:
        return "—", None
    parts, holds = [], True
    for trace in ("mooncake", "azure_conv"):
        r, d = (
            cond(doc, trace=trace, factor=2.5, excess="reject"),
            cond(doc, trace=trace, factor=2.5, excess="demote"),
        )
        rt, dt = (
            cond(doc, trace=trace, factor=1.5, excess="reject"),
            cond(doc, trace=trace, factor=1.5, excess="demote"),
        )
        if r is None or d is None or rt is None or dt is None:
            continue
        parts.append(
            f"{trace}: ×2.5 unmet {fmt(r['offered_unmet'], 2)} → {fmt(d['offered_unmet'], 2)}; "
            f"×1.5 floor met {fmt(rt['floor_attainment'])} vs {fmt(dt['floor_attainment'])}"
        )
        holds = holds and (d["offered_unmet"] or 0) < (r["offered_unmet"] or 0)
        holds = holds and (dt["floor_attainment"] or 0) <= (rt["floor_attainment"] or 0)
    return "; ".join(parts), holds


def server_priority(docs: Docs) -> Answer:
    doc = _get(docs, "server-priority")
    if doc is None:
        return "—", None
    sp = {c["params"]["deadline"]: c["assured_miss"] for c in conds(doc, arm="server-priority")}
    g = {c["params"]["deadline"]: c["assured_miss"] for c in conds(doc, arm="guard")}
    text = "server " + ", ".join(f"{d * 1000:.0f}: {fmt(m)}" for d, m in sorted(sp.items(), reverse=True))
    text += f"; guard max {fmt(max(g.values()))}"
    loosest = max(sp)
    tightest = min(sp)
    return text, (sp[loosest] or 0) == 0.0 and (sp[tightest] or 0) > (g[tightest] or 0)


def _pick(docs: Docs, experiment: str, *selectors: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The condition each selector picks in ``experiment``'s document (None when any is missing)."""
    doc = _get(docs, experiment)
    found = [] if doc is None else [cond(doc, **sel) for sel in selectors]
    picked = [c for c in found if c is not None]
    return picked if doc is not None and len(picked) == len(selectors) else None


def rate_limit(docs: Docs) -> Answer:
    got = _pick(docs, "rate-limit", {"arm": "rate-limit-class"}, {"arm": "rate-limit-flat"})
    if got is None:
        return "—", None
    pc, flat = got
    text = f"per-class miss {fmt(pc['assured_miss'])}; "
    text += f"flat unmet {fmt(flat['offered_unmet'])} (miss {fmt(flat['assured_miss'])})"
    return text, pc["assured_miss"] == 0.0 and (flat["offered_unmet"] or 0) > 0.3


def tokens(docs: Docs) -> Answer:
    got = _pick(docs, "token-credits", {"credit": "count"}, {"credit": "tokens"})
    if got is None:
        return "—", None
    count, tok = got
    large = docs["token-credits"].get("large_fraction")
    text = (
        f"count: admitted miss {fmt(count['assured_miss'])}; "
        f"tokens: admitted miss {fmt(tok['assured_miss'])}, "
        f"offered unmet {fmt(tok['offered_unmet'])} (large fraction {large})"
    )
    return text, (count["assured_miss"] or 0) > 0.4 and tok["assured_miss"] == 0.0


def gaie(docs: Docs) -> Answer:
    got = _pick(
        docs,
        "gaie-fault",
        *({"policy": p, "learner": "admit-all"} for p in ("gaie-correct", "gaie-swapped", "guard")),
    )
    if got is None:
        return "—", None
    ok, bad, g = got
    text = f"correct {fmt(ok['assured_miss'])} → swapped {fmt(bad['assured_miss'])}; "
    text += f"guard {fmt(g['assured_miss'])}"
    return text, ok["assured_miss"] == 0.0 and (bad["assured_miss"] or 0) > 0.8 and g["assured_miss"] == 0.0


def bands(docs: Docs) -> Answer:
    doc = _get(docs, "gaie-fault")
    c = None if doc is None else cond(doc, policy="gaie-correct", learner="burst")
    if c is None:
        return "—", None
    text = f"high band {fmt(c['assured_miss'])} vs low band {fmt(c['opp_miss'])}"
    return text, 0.0 < (c["assured_miss"] or 0) < (c["opp_miss"] or 0)


def capacity(docs: Docs) -> Answer:
    doc = _get(docs, "capacity-drop")
    if doc is None:
        return "—", None
    cap = min(c["params"]["batch_cap"] for c in doc["conditions"])
    f, w = cond(doc, batch_cap=cap, floor="fixed"), cond(doc, batch_cap=cap, floor="watch")
    if f is None or w is None:
        return "—", None
    cut = f["params"]["throughput_cut"]
    text = (
        f"cut {100 * cut:.0f} %: fixed unmet {fmt(f['offered_unmet'])} ({f['rejected']} rejected); "
        f"lowered unmet {fmt(w['offered_unmet'])}, miss {fmt(w['assured_miss'])}"
    )
    late = f["rejected"] == 0 and (f["offered_unmet"] or 0) > 0.5
    return text, late and w["assured_miss"] is not None and w["assured_miss"] < 0.05


def _row(docs: Docs, scope: str, dial: str, regime: str) -> Mapping[str, Any] | None:
    doc = _get(docs, "screen-eval")
    if doc is None:
        return None
    return next(
        (r for r in doc["summary"] if (r["scope"], r["dial"], r["regime"]) == (scope, dial, regime)), None
    )


def _cell(row: Mapping[str, Any], key: str) -> str:
    ci = row.get(f"{key}_ci")
    return f"{row[key]:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") + f" ({row['cells']} cells)"


def screen(
    scope: str, dial: str, regime: str, key: str, check: Callable[[float], bool]
) -> Callable[[Docs], Answer]:
    """One figure of the screen's evaluation; the shape holds when ``check`` accepts it."""

    def answer(docs: Docs) -> Answer:
        row = _row(docs, scope, dial, regime)
        if row is None or row[key] is None:
            return "—", None
        return _cell(row, key), check(row[key])

    return answer


def screen_overload(docs: Docs) -> Answer:
    row = _row(docs, "in-sample", "p50", "overload")
    if row is None or row["precision"] is None or row["recall"] is None:
        return "—", None
    text = f"precision {_cell(row, 'precision')}; recall {_cell(row, 'recall')}"
    return text, row["precision"] >= 0.9 and row["recall"] >= 0.9


def screen_overflag(docs: Docs) -> Answer:
    p99, p50 = _row(docs, "in-sample", "p99", "all"), _row(docs, "in-sample", "p50", "all")
    if p99 is None or p50 is None or p99["recall"] is None or p50["recall"] is None:
        return "—", None
    shape = p99["recall"] < p50["recall"]  # the p99 screen flags fewer: the study's direction
    # the magnitude is the claim too: a recall far from the study's 0.814 is only partly the same
    return f"{_cell(p99, 'recall')} (p50: {p50['recall']:.3f})", (
        "partly" if shape and abs(p99["recall"] - 0.814) > 0.2 else shape
    )


def screen_held_out(docs: Docs) -> Answer:
    held, ins = _row(docs, "held-out", "p99", "all"), _row(docs, "in-sample", "p99", "all")
    if held is None or ins is None or held["precision"] is None or ins["precision"] is None:
        return "—", None
    text = f"{ins['precision']:.3f} → {_cell(held, 'precision')}"
    return text, held["precision"] < ins["precision"]


def not_run(_: Docs) -> Answer:
    return "not run", None
