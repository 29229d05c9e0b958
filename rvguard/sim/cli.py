"""``rvguard simulate | experiment | demo``: thin drivers over `rvguard.sim` (DESIGN §8).

`rvguard.cli` finds this module and calls `add_parser`; each subcommand sets
``run`` to a function returning the exit code (0 ok / holds, 1 fails,
2 bad input — errors are raised as `RvguardError`s and mapped by the main CLI).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..contract import Contract, load_contract
from ..enforce.request import Request
from ..errors import SpecError
from ..io import TraceWriter
from .backend import BackendModel
from .catalog import DEFAULT_CONTRACTS, EXPERIMENTS
from .experiments import ExperimentResult
from .run import LEARNERS, run_once
from .workloads import bursty, poisson, replay, split_rate

__all__ = ["add_parser"]

#: the P95 screen's evaluation harness (rvguard.screen.eval_cli), run through the simulator
SCREEN_EVAL = "screen-eval"

DEMO_REPS = 40


def add_parser(sub: Any) -> None:
    """Register ``simulate``, ``experiment`` and ``demo`` on the main CLI's subparsers."""
    p = sub.add_parser("simulate", help="simulate a workload under the guard (or a baseline)")
    p.add_argument("spec", help="contract file (.yaml or .json)")
    p.add_argument("--workload", default="poisson", help="poisson | bursty | a public trace FILE")
    p.add_argument("--rate", type=float, default=18.0, help="total offered rate (req/s); assured gets B/W")
    p.add_argument("--duration", type=float, default=12.0, help="seconds of arrivals")
    p.add_argument("--cv", type=float, default=3.0, help="interarrival CV of the bursty workload")
    p.add_argument("--learner", default="admit-all", choices=LEARNERS)
    p.add_argument("--beta", type=float, default=1.0, help="LSQ miscalibration β")
    p.add_argument("--no-guard", action="store_true", help="unguarded: the learner alone, FIFO, no floor")
    p.add_argument("--fifo", action="store_true", help="gated FIFO: the guard's admission, FIFO dispatch")
    p.add_argument("--batch-cap", type=int, help="degrade capacity: sequences decoded at once")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="trace to write (.jsonl, .csv or .parquet)")
    p.set_defaults(run=_run_simulate)

    e = sub.add_parser("experiment", help="regenerate one of the reference study's experiments")
    e.add_argument("name", choices=sorted([*EXPERIMENTS, SCREEN_EVAL]))
    e.add_argument("--spec", default=None, help="contract (default: the marquee contract)")
    e.add_argument("--reps", type=int, default=None, help="runs per condition (default: the experiment's)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--out", default="results", help="directory for the PNG plot")
    e.add_argument("--json", action="store_true")
    e.add_argument("--folds", type=int, default=None, help="screen-eval: held-out folds (default: reps)")
    e.add_argument("--grid", choices=("default", "small"), default="default", help="screen-eval grid")
    e.set_defaults(run=_run_experiment)

    d = sub.add_parser("demo", help="the beta-sweep (40 reps a condition) on the embedded simulator")
    d.add_argument("--reps", type=int, default=DEMO_REPS)
    d.add_argument("--out", default=None, help="directory for the plot (default: a temp dir)")
    d.set_defaults(run=_run_demo)


def _arrivals(args: argparse.Namespace, contract: Contract) -> list[Request]:
    rng = random.Random(f"arrivals:{args.seed}")  # a stream apart from the run's (run.py)
    if args.rate <= 0 or args.duration <= 0:
        raise SpecError("--rate and --duration must be positive", field="rate")
    a_rate, o_rate = split_rate(contract, args.rate)
    load = {"assured_rate": a_rate, "opp_rate": o_rate, "duration": args.duration}
    if args.workload == "poisson":
        return poisson(contract, rng, **load)
    if args.workload == "bursty":
        return bursty(contract, rng, cv=args.cv, **load)
    if not Path(args.workload).is_file():
        raise SpecError(f"--workload: not poisson, bursty or a file: {args.workload!r}", field="workload")
    return replay(args.workload, contract, rate=args.rate, duration=args.duration, seed=args.seed)


def _run_simulate(args: argparse.Namespace) -> int:
    contract = load_contract(args.spec)
    mode = "unguarded" if args.no_guard else ("gated-fifo" if args.fifo else "guarded")
    model = BackendModel(slots=contract.slots, batch_cap=args.batch_cap)
    arrivals = _arrivals(args, contract)
    out = run_once(
        contract, arrivals, mode=mode, learner=args.learner, beta=args.beta, seed=args.seed, model=model
    )
    with TraceWriter(args.out) as w:
        for ev in out.result.events:
            w.write(ev)
    m = out.metrics
    props = sorted({v.property for v in out.violations})
    print(
        f"simulated {mode}, learner {args.learner}: {len(arrivals)} arrivals, "
        f"{len(out.result.events)} events → {args.out}\n"
        f"  assured admitted miss {_fmt(m.admitted_miss)} ({m.admitted_missed}/{m.admitted_judged}), "
        f"floor attainment {_fmt(m.floor_attainment)}, violated: {', '.join(props) or 'none'}"
    )
    return 0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _marquee() -> Contract:
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        path = base / "specs" / "marquee.yaml"
        if path.is_file():
            return load_contract(path)
    from .experiments import MARQUEE_CONTRACT

    return MARQUEE_CONTRACT


def render_table(result: ExperimentResult) -> str:
    """A plain-text table: one row per condition."""
    lines = [f"experiment {result.name} (assured miss among admitted; 95% CP, run-clustered)"]
    for c in result.conditions:
        params = " ".join(f"{k}={v}" for k, v in c.params.items())
        lo, hi = c.assured_miss_ci
        lines.append(
            f"  {params:<48} reps={c.reps:<3} miss={_fmt(c.assured_miss)}  CI=[{lo:.3f}, {hi:.3f}]  "
            f"runs-with-miss={sum(1 for m in c.missed if m)}/{c.reps}  "
            f"AF/DR/WF-violations={sum(c.violations)}{_extras(c.extras)}"
        )
    return "\n".join(lines)


def _extras(extras: dict[str, Any]) -> str:
    """The extras worth a column: attainment, ρ_eff, SF and phase-sweep figures."""
    keys = ("floor_attainment", "rho_eff", "sf_violations", "phase_worst_attainment", "floor_lowered_rejects")
    parts = [
        f"{k}={_fmt(v) if isinstance(v, float) or v is None else v}" for k, v in extras.items() if k in keys
    ]
    return ("  " + " ".join(parts)) if parts else ""


def _experiment(
    name: str, spec: str | None, reps: int | None, seed: int, out: str
) -> tuple[ExperimentResult, Path]:
    from .plots import plot_experiment

    if reps is not None and reps < 1:
        raise SpecError(f"--reps must be at least 1, got {reps}", field="reps")
    contract = load_contract(spec) if spec else DEFAULT_CONTRACTS.get(name) or _marquee()
    kwargs = {} if reps is None else {"reps": reps}
    result = EXPERIMENTS[name](contract, seed=seed, **kwargs)
    return result, plot_experiment(result, out)


def _run_experiment(args: argparse.Namespace) -> int:
    if args.name == SCREEN_EVAL:  # the P95 screen's evaluation lives with the screen
        from ..screen.eval_cli import run_screen_eval

        return run_screen_eval(args)
    result, plot = _experiment(args.name, args.spec, args.reps, args.seed, args.out)
    if args.json:
        print(json.dumps({**result.to_dict(), "plot": str(plot)}, indent=2))
    else:
        print(render_table(result))
        print(f"plot: {plot}")
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    out = args.out or tempfile.mkdtemp(prefix="rvguard-demo-")
    print(f"rvguard demo: beta-sweep on the embedded simulator, {args.reps} reps a condition …", flush=True)
    result, plot = _experiment("beta-sweep", None, args.reps, 0, out)
    print(render_table(result))
    guarded = [c.assured_miss or 0.0 for c in result.conditions if c.params["guard"]]
    unguarded = [c.assured_miss or 0.0 for c in result.conditions if not c.params["guard"]]
    print(
        f"\nguarded assured miss: max {max(guarded):.3f} over every β; "
        f"unguarded: {min(unguarded):.3f}–{max(unguarded):.3f}"
    )
    print(f"plot (miss vs β, assured completions vs deadline): {plot}")
    holds = max(guarded) == 0.0 and min(unguarded) >= 0.8
    if not holds:
        print("the reference study's shape did NOT reproduce", file=sys.stderr)
    return 0 if holds else 1
