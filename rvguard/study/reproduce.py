"""``rvguard experiment reproduce --out DIR``: every experiment, then one table of the study's claims.

Why one command: the evidence is only as good as its weakest row, and a
reader should be able to regenerate all of it and see, claim by claim,
the study's number beside ours (`rvguard.study.claims`). The command runs
every registered experiment on the simulator (and the backend calibration
and the P95 screen's evaluation), writes each one's ``--json`` document to
``DIR/sim/NAME.json``, reads the real engine's documents from
``--engine-results`` (the ``--json`` output of ``rvguard experiment NAME
--backend URL``, one ``NAME.json`` each: engine runs are slow and noisy, so
they are recorded, not rerun here), and writes ``DIR/reproduction.md``.

``quick`` (tests) runs one rep and short replays: the table's shape, not
its numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..clock import MonotonicClock
from ..contract import Contract
from ..sim.backend import CALIBRATION, BackendModel
from ..sim.catalog import DEFAULT_CONTRACTS, EXPERIMENTS
from ..sim.loads import MARQUEE_CONTRACT
from .claim_answers import Docs, Shape, fmt
from .claims import CLAIMS, Claim, engine_note

__all__ = ["counts", "held", "render", "reproduce"]

QUICK_KWARGS: dict[str, dict[str, Any]] = {
    "trace-replay": {"duration": 60.0},
    "demote-vs-reject": {"duration": 100.0},
}


def _calibration_doc(model: BackendModel) -> dict[str, Any]:
    from ..sim.calibration import measure

    return {
        "experiment": "calibration",
        "profile": model.name,
        "measured": measure(model),
        "targets": {p.name: p.target for p in CALIBRATION},
    }


def _screen_doc(quick: bool, seed: int) -> dict[str, Any]:
    from ..screen.evaluate import default_grid, evaluate, small_grid

    grid = small_grid() if quick else default_grid()
    result = evaluate(grid, reps=2 if quick else 10, seed=seed)
    return {"experiment": "screen-eval", "summary": [r.to_dict() for r in result.rows]}


def reproduce(
    out: str | Path,
    *,
    reps: int | None = None,
    seed: int = 0,
    engine: str | Path | None = None,
    quick: bool = False,
    sim: str | Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Path:
    """Run everything, write ``out/sim/*.json`` and ``out/reproduction.md``; return the table's path.

    ``sim`` names a directory of simulator documents an earlier run wrote
    (its ``sim/``): they are read instead of rerun (to re-render the table
    after new engine runs; the simulator is deterministic).
    """
    root = Path(out)
    (root / "sim").mkdir(parents=True, exist_ok=True)
    if sim is not None:
        saved = _load_docs(sim)
        text = render(saved, _load_engine(engine), reps=reps, seed=seed, rerendered=True)
        (root / "reproduction.md").write_text(text)
        return root / "reproduction.md"
    docs: dict[str, Mapping[str, Any]] = {}
    timings: dict[str, float] = {}
    clock = MonotonicClock()
    claimed = {n.strip() for c in CLAIMS for n in c.experiment.split(",")}
    for name, fn in EXPERIMENTS.items():
        if name not in claimed:
            continue  # not a claim of the study (e.g. the runbook's fleet-pooling)
        contract: Contract = DEFAULT_CONTRACTS.get(name) or MARQUEE_CONTRACT
        kwargs: dict[str, Any] = dict(QUICK_KWARGS.get(name, {})) if quick else {}
        if reps is not None or quick:
            kwargs["reps"] = 1 if quick else reps
        progress(f"{name} …")
        started = clock.now()
        docs[name] = fn(contract, seed=seed, **kwargs).to_dict()
        timings[name] = clock.now() - started
    progress("calibration …")
    started = clock.now()
    docs["calibration"] = _calibration_doc(BackendModel())
    timings["calibration"] = clock.now() - started
    progress("screen-eval …")
    started = clock.now()
    docs["screen-eval"] = _screen_doc(quick, seed)
    timings["screen-eval"] = clock.now() - started
    for name, doc in docs.items():
        (root / "sim" / f"{name}.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    engine_docs = _load_engine(engine)
    table = root / "reproduction.md"
    table.write_text(render(docs, engine_docs, reps=reps, seed=seed, quick=quick, timings=timings))
    return table


def _load_docs(path: str | Path, *, need: tuple[str, ...] = ()) -> dict[str, Mapping[str, Any]]:
    """Every ``*.json`` experiment document in ``path`` by its ``experiment`` name."""
    out: dict[str, Mapping[str, Any]] = {}
    for f in sorted(Path(path).glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "experiment" in doc and all(k in doc for k in need):
            out[str(doc["experiment"])] = doc
    return out


def _load_engine(path: str | Path | None) -> dict[str, Mapping[str, Any]]:
    if path is None or not Path(path).is_dir():
        return {}
    return _load_docs(path, need=("conditions",))


def _verdict(claim: Claim, sim: Shape, eng: Shape) -> tuple[str, str]:
    """The row's verdict from the two shapes (module `rvguard.study.claim_answers`: True, "partly", False)."""
    if sim is None:
        return "not reproduced", claim.why
    word = {True: "reproduced in shape", "partly": "partly reproduced", False: "differs"}[sim]
    if claim.fit:  # matched by calibration: a check of the fit, not a test of the model
        word = "fit target (matched by calibration)" if sim is True else f"fit target; {word}"
    if eng is not None and eng is not True:
        word += "; on the engine " + ("partly" if eng == "partly" else "differs")
    elif eng is True:
        word += "; engine agrees"
    return word, claim.why


def counts(c: Mapping[str, Any]) -> bool:
    """Whether an engine condition enters the verdicts: not run on a contended machine, and, when it
    is the guard's (guarded, priority dispatch), its SF preconditions held by the watch's evidence.

    A baseline (unguarded, or the FIFO ablation's dispatch) keeps its place whatever its
    preconditions: the guard claims nothing of its misses (DESIGN §12).
    """
    if c.get("contended") is True:
        return False
    params = c.get("params", {})
    guarded = params.get("guard") is True and params.get("dispatch", "priority") != "fifo"
    return not guarded or c.get("preconditions") == "held"


def held(engine: Docs) -> Docs:
    """The engine documents run under the pinned protocol, with only the conditions that `counts`."""
    out: dict[str, Mapping[str, Any]] = {}
    for name, doc in engine.items():
        if "protocol" in doc:
            out[name] = {**doc, "conditions": [c for c in doc["conditions"] if counts(c)]}
    return out


def _engine_answer(claim: Claim, engine: Docs) -> tuple[str, Shape]:
    """The claim answered from the held engine conditions; a document left without the conditions
    the claim compares answers nothing (its conditions were broken, contended or not run)."""
    if not (claim.engine and engine):
        return "—", None
    try:
        return claim.answer(engine)
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        return "— (no held condition)", None


def _row(i: int, claim: Claim, docs: Docs, engine: Docs) -> str:
    sim_text, sim_ok = claim.answer(docs)
    eng_text, eng_ok = _engine_answer(claim, engine)
    verdict, why = _verdict(claim, sim_ok, eng_ok)
    cells = [str(i), claim.section, claim.text, claim.study, sim_text, eng_text, verdict, why or ""]
    return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"


def render(
    docs: Docs,
    engine: Docs,
    *,
    reps: int | None,
    seed: int,
    quick: bool = False,
    timings: Mapping[str, float] | None = None,
    rerendered: bool = False,
) -> str:
    """The reproduction table as Markdown (module doc); ``rerendered``: from saved simulator documents."""
    head = [
        "# Reproduction of the reference study's claims",
        "",
        "Generated by `rvguard experiment reproduce --out DIR"
        + (f" --reps {reps}" if reps else "")
        + (" --engine-results docs/engine" if engine else "")
        + "`"
        + (" (re-rendered with `--sim-results` from that run's simulator documents)" if rerendered else "")
        + "; do not edit by hand. One row per quantitative claim of the study's evaluation: the study's "
        "number, the simulator's (study profile, `rvguard.sim.backend.BackendModel()`), the real vLLM CPU "
        "engine's where it was run, and a verdict computed from the numbers: *reproduced in shape* when the "
        "comparison the study draws comes out the same way; *fit target* when the model was calibrated to "
        "that very number (a check of the fit, not a test of the model). Where the simulator differs, the "
        "last column says why; no model parameter was tuned to a number it has no mechanism for.",
        "",
        f"Seed {seed}; reps: {'1 (quick: shapes only)' if quick else (reps or 'each experiment’s default')}. "
        "Fractions are pooled over runs; `--json` of each experiment (in `sim/`) holds the run-clustered "
        "95 % intervals. " + engine_note(CLAIMS) + ".",
        "",
        "| # | where | claim | study | simulator | vLLM CPU engine | verdict | why it differs / note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = [_row(i, c, docs, held(engine)) for i, c in enumerate(CLAIMS, 1)]
    tail = ["", _engine_section(engine), _timing_section(timings or {})]
    return "\n".join(head + rows + tail) + "\n"


ENGINE_NOTE = (
    "The engine is the tiny random-weight Llama on vLLM's CPU backend (C = 4); each request asks for "
    "128 tokens where the study's asked 16, and every time is scaled by k = the path's measured "
    "saturated service through the gateway over the study's (`docs/simulator.md`). The runs follow the "
    'pinned protocol (`scripts/engine_protocol.py`, docs/experiments.md "Engine evidence"): one '
    "experiment at a time on a 2-core machine, the engine pinned to CPU 1 and the gateway and client to "
    "CPU 0; k re-measured before every arm; the machine's 1-minute load recorded before and after each "
    "arm with the CPU its own processes and all others used, and an arm run while the other processes "
    "used more than a quarter of a core marked *contended* and run again. Each condition is labelled from "
    "its traces (`preconditions`: held, or broken with the conditions that broke: the watch's alerts, "
    "the breaks recomputed from the requests; `backlog` counts a backlog above B or above what the "
    "deadline covers, which the deadline sweep's shorter deadlines pass by design); the verdicts "
    "above use the guard's conditions whose preconditions held on an uncontended machine (baselines whatever "
    "theirs), and a broken one is the watch doing its job: its misses are attributed to the broken "
    "precondition, not to the guard. Each run's trace is kept under `docs/engine/traces/` beside the "
    "scaled contract it is judged against (`gunzip -c T.jsonl.gz | rvguard check - --contract "
    "T.contract.json`)."
)


def _load_cell(c: Mapping[str, Any]) -> str:
    if "loadavg_1m_before" not in c:
        return "—"
    text = f"{fmt(c['loadavg_1m_before'], 1)}→{fmt(c['loadavg_1m_after'], 1)} (own {fmt(c['own_cpu'], 1)})"
    if c.get("contended"):
        text += "; contended"
    if c.get("attempts", 1) > 1:
        text += f"; attempt {c['attempts']}"
    return text


def _preconditions_cell(c: Mapping[str, Any]) -> str:
    label = c.get("preconditions")
    if label is None:
        return "unlabelled"
    breaks = c.get("precondition_breaks") or {}
    return str(label) + (" (" + ", ".join(f"{k} {v}" for k, v in breaks.items()) + ")" if breaks else "")


def _summary(engine: Docs) -> str:
    """How many conditions held, broke or ran contended, and the machine's load over them."""
    cs = [c for doc in engine.values() for c in doc["conditions"]]
    label = [_preconditions_cell(c).split(" ")[0] for c in cs]
    loads = [x for c in cs for x in (c.get("loadavg_1m_before"), c.get("loadavg_1m_after")) if x is not None]
    text = f"{len(cs)} conditions: {label.count('held')} held, {label.count('broken')} broken"
    text += f", {sum(1 for c in cs if c.get('contended'))} contended"
    if loads:
        text += f"; 1-minute load {min(loads):.1f} to {max(loads):.1f} across them"
    return text + "."


def _engine_section(engine: Docs) -> str:
    if not engine:
        return "No engine results were given (`--engine-results DIR`)."
    pinned = {n: d for n, d in engine.items() if "protocol" in d}
    lines = ["## Engine runs", "", ENGINE_NOTE, ""]
    if before := sorted(set(engine) - set(pinned)):
        lines += [f"Not used (run before the pinned protocol): {', '.join(before)}.", ""]
    if not pinned:
        return "\n".join(lines)
    lines += [_summary(pinned), ""]
    lines += [
        "| experiment | condition | reps | k | load 1 min (own CPU) | preconditions | assured miss "
        "| entitled miss trace / client | offered unmet | ρ_eff | assured service (s) |"
    ]
    lines += ["|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, doc in pinned.items():
        for c in doc["conditions"]:
            shown = (
                c["params"].items()
                if "arm" not in c["params"]
                else ((k, v) for k, v in c["params"].items() if k != "guard")
            )  # the arm names the guard where there is one
            params = " ".join(f"{k}={v}" for k, v in shown)
            cells = [name, params, str(c.get("reps", "—")), fmt(c.get("time_scale"), 2), _load_cell(c)]
            cells += [_preconditions_cell(c), fmt(c.get("assured_miss"))]
            cells += [f"{fmt(c.get('entitled_trace_miss'))} / {fmt(c.get('entitled_client_miss'))}"]
            cells += [
                fmt(c.get("offered_unmet")),
                fmt(c.get("rho_eff"), 2),
                fmt(c.get("assured_service_mean")),
            ]
            lines.append("| " + " | ".join(x.replace("|", "/") for x in cells) + " |")
    return "\n".join(lines)


def _timing_section(timings: Mapping[str, float]) -> str:
    if not timings:
        return ""
    total = sum(timings.values())
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
    return f"\nSimulator wall time: {total:.0f} s ({parts})."
