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

__all__ = ["render", "reproduce"]

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


def _row(i: int, claim: Claim, docs: Docs, engine: Docs) -> str:
    sim_text, sim_ok = claim.answer(docs)
    eng_text, eng_ok = claim.answer(engine) if claim.engine and engine else ("—", None)
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
    rows = [_row(i, c, docs, engine) for i, c in enumerate(CLAIMS, 1)]
    tail = ["", _engine_section(engine), _timing_section(timings or {})]
    return "\n".join(head + rows + tail) + "\n"


ENGINE_NOTE = (
    "The engine is the tiny random-weight Llama on vLLM's CPU backend (C = 4), on a 2-core machine "
    "shared with other work (load averages of 10 to 55 during these runs; one engine was OOM-killed "
    "and restarted); each request asks for 128 tokens where the study's asked 16, and every time is "
    "scaled by k = the path's measured saturated service through the gateway over the study's "
    "(`docs/simulator.md`), measured again at the start of each experiment. Two things make these "
    "runs weak evidence either way. The machine's load moved during a run, and with it the engine's "
    "capacity: a condition whose assured service ran well above k × 0.42 s carried more load than "
    "the scaled contract planned (see its `rho_eff`). And the capacity through the gateway with C = 4 "
    "slots (the k measurement) is about half of what the engine alone sustains (its batch-4 timing in "
    "`docs/engine/calibrate.json`): each slot idles between a request's last token and the gateway's "
    "next dispatch, while the unguarded stack hands vLLM its whole queue, so here the unguarded arms "
    "had more capacity than the guarded ones. And the assumption watch was off in these runs: in the "
    "guarded β = 0 arm about half of the assured services ran above s_max and the assured backlog "
    "reached 14 with B = 6, so its preconditions were broken and its misses are not the guard's; "
    "the engine verdicts above do not separate held from broken conditions. Experiments now label "
    "each condition (`preconditions`: held or broken, from the watch's alerts or recomputed from the "
    "trace); these engine runs predate that and are to be redone."
)


def _engine_section(engine: Docs) -> str:
    if not engine:
        return "No engine results were given (`--engine-results DIR`)."
    lines = ["## Engine runs", "", ENGINE_NOTE, ""]
    lines += [
        "| experiment | condition | reps | k | assured miss | offered unmet | ρ_eff | assured service (s) |"
    ]
    lines += ["|---|---|---|---|---|---|---|---|"]
    for name, doc in engine.items():
        for c in doc["conditions"]:
            params = " ".join(f"{k}={v}" for k, v in c["params"].items() if k not in ("guard",))
            cells = [name, params, str(c.get("reps", "—")), fmt(c.get("time_scale"), 2)]
            cells += [fmt(c.get(key)) for key in ("assured_miss", "offered_unmet")]
            cells += [fmt(c.get("rho_eff"), 2), fmt(c.get("assured_service_mean"))]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _timing_section(timings: Mapping[str, float]) -> str:
    if not timings:
        return ""
    total = sum(timings.values())
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
    return f"\nSimulator wall time: {total:.0f} s ({parts})."
