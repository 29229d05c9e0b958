"""``rvguard simulate | experiment | demo``: thin drivers over `rvguard.sim` (DESIGN §8).

Declared in `rvguard.sim.commands`: `Simulate`, `Experiment` and `Demo` follow the CLI's
plugin protocol (``add_arguments`` and ``run``, True when it holds); bad input is raised as
an `RvguardError` and mapped to exit 2 by `rvguard.cli`. The experiment names come from the
registry, `rvguard.sim.catalog.EXPERIMENTS`.
"""

from __future__ import annotations

import argparse
import json
import math
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
from .plots import check_out_dir, plot_experiment, pyplot
from .run import LEARNERS, run_once
from .workloads import bursty, floor_rate, poisson, replay, split_rate

__all__ = ["Demo", "Experiment", "Simulate", "render_table"]

DEMO_REPS = 40
#: a synthetic workload expecting more arrivals (rate × duration) is refused unless --max-arrivals says so
MAX_ARRIVALS = 10_000_000
BETA_LEARNERS = ("lsq", "lsq-agnostic")


def _add_simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="contract file (.yaml or .json)")
    p.add_argument("--workload", default="poisson", help="poisson | bursty | a public trace FILE")
    p.add_argument(
        "--rate", type=float, default=18.0, help="total offered rate (req/s); floored tenants get Σ B/W"
    )
    p.add_argument("--duration", type=float, default=12.0, help="seconds of arrivals")
    p.add_argument("--cv", type=float, default=None, help="interarrival CV of the bursty workload (3)")
    p.add_argument("--learner", default="admit-all", choices=LEARNERS)
    p.add_argument("--beta", type=float, default=None, help="LSQ miscalibration β (lsq learners; 1)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--no-guard", action="store_true", help="unguarded: the learner alone, FIFO, no floor")
    mode.add_argument("--fifo", action="store_true", help="gated FIFO: the guard's admission, FIFO dispatch")
    p.add_argument("--batch-cap", type=int, help="degrade capacity: sequences decoded at once (≥ 1)")
    p.add_argument(
        "--max-arrivals",
        type=int,
        default=MAX_ARRIVALS,
        help=f"refuse a poisson/bursty workload expecting more (rate × duration; {MAX_ARRIVALS:.0e})",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="trace to write (.jsonl, .csv or .parquet)")


def _add_experiment(e: argparse.ArgumentParser) -> None:
    e.add_argument("name", choices=sorted(EXPERIMENTS))
    e.add_argument("--spec", default=None, help="contract (default: the marquee contract)")
    e.add_argument("--reps", type=int, default=None, help="runs per condition (default: the experiment's)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--out", default="results", help="directory for the PNG plot")
    e.add_argument("--json", action="store_true")


def _add_demo(d: argparse.ArgumentParser) -> None:
    d.add_argument("--reps", type=int, default=DEMO_REPS)
    d.add_argument("--out", default=None, help="directory for the plot (default: a temp dir)")


def _positive(option: str, value: float, *, zero: bool = False) -> None:
    """Refuse a non-finite value, or one ≤ 0 (< 0 with ``zero``), naming the option."""
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        need = "≥ 0" if zero else "> 0"
        raise SpecError(f"{option} must be a finite number {need}, got {value!r}", field=option, value=value)


def _check_simulate(args: argparse.Namespace) -> None:
    """Every simulate option checked before anything runs: bad input exits 2 naming the option."""
    _positive("--rate", args.rate)
    _positive("--duration", args.duration)
    if args.beta is not None:
        if args.learner not in BETA_LEARNERS:
            raise SpecError(f"--beta applies only to --learner {' or '.join(BETA_LEARNERS)}", field="--beta")
        _positive("--beta", args.beta, zero=True)
    if args.cv is not None:
        if args.workload != "bursty":
            raise SpecError("--cv applies only to --workload bursty", field="--cv")
        _positive("--cv", args.cv)
    if args.batch_cap is not None and args.batch_cap < 1:
        raise SpecError(f"--batch-cap must be at least 1, got {args.batch_cap}", field="--batch-cap")
    if args.max_arrivals < 1:
        raise SpecError(f"--max-arrivals must be at least 1, got {args.max_arrivals}", field="--max-arrivals")
    expected = args.rate * args.duration
    if args.workload in ("poisson", "bursty") and expected > args.max_arrivals:
        raise SpecError(
            f"--rate {args.rate:g} × --duration {args.duration:g} s ≈ {expected:.3g} arrivals, more than "
            f"--max-arrivals {args.max_arrivals}; raise --max-arrivals to simulate that many",
            field="--max-arrivals",
        )


def _arrivals(args: argparse.Namespace, contract: Contract) -> list[Request]:
    """The workload: floored tenants offered up to Σ B/W, the rest to unfloored ones (`workloads.roles`)."""
    rng = random.Random(f"arrivals:{args.seed}")  # a stream apart from the run's (run.py)
    a_rate, o_rate = split_rate(contract, args.rate)
    if o_rate > 0 and not any(not t.floored for t in contract.tenants.values()):
        raise SpecError(
            f"--rate {args.rate:g} exceeds the floors' Σ B/W = {floor_rate(contract):g} req/s and the "
            "contract has no unfloored tenant (floor 0) to offer the rest to; lower --rate",
            field="--rate",
        )
    load = {"assured_rate": a_rate, "opp_rate": o_rate, "duration": args.duration}
    if args.workload == "poisson":
        return poisson(contract, rng, **load)
    if args.workload == "bursty":
        return bursty(contract, rng, cv=3.0 if args.cv is None else args.cv, **load)
    if not Path(args.workload).is_file():
        raise SpecError(f"--workload: not poisson, bursty or a file: {args.workload!r}", field="workload")
    try:
        return replay(args.workload, contract, rate=args.rate, duration=args.duration, seed=args.seed)
    except SpecError as err:
        raise SpecError(f"--workload: {err}", field="workload") from err


def _run_simulate(args: argparse.Namespace) -> bool:
    _check_simulate(args)
    contract = load_contract(args.spec)
    mode = "unguarded" if args.no_guard else ("gated-fifo" if args.fifo else "guarded")
    model = BackendModel(slots=contract.slots, batch_cap=args.batch_cap)
    arrivals = _arrivals(args, contract)
    beta = 1.0 if args.beta is None else args.beta
    out = run_once(
        contract, arrivals, mode=mode, learner=args.learner, beta=beta, seed=args.seed, model=model
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
    return True


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
            f"AF-violations={c.af_violations} DR/WF-violations={c.dr_wf_violations}{_extras(c.extras)}"
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
    if reps is not None and reps < 1:
        raise SpecError(f"--reps must be at least 1, got {reps}", field="reps")
    contract = load_contract(spec) if spec else DEFAULT_CONTRACTS.get(name) or _marquee()
    kwargs = {} if reps is None else {"reps": reps}
    result = EXPERIMENTS[name](contract, seed=seed, **kwargs)
    return result, plot_experiment(result, out)


def _run_experiment(args: argparse.Namespace) -> bool:
    check_out_dir(args.out)
    pyplot()  # the plot needs the sim extra: refuse now, not after the runs
    result, plot = _experiment(args.name, args.spec, args.reps, args.seed, args.out)
    if args.json:
        print(json.dumps({**result.to_dict(), "plot": str(plot)}, indent=2))
    else:
        print(render_table(result))
        print(f"plot: {plot}")
    return True


def _run_demo(args: argparse.Namespace) -> bool:
    if args.reps < 1:
        raise SpecError(f"--reps must be at least 1, got {args.reps}", field="reps")
    check_out_dir(args.out)
    pyplot()  # the plot needs the sim extra: refuse now, not after the runs
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
    return holds


class Simulate:
    """``rvguard simulate``: one seeded run written as a trace; True once written."""

    add_arguments = staticmethod(_add_simulate)
    run = staticmethod(_run_simulate)


class Experiment:
    """``rvguard experiment NAME``: one registered experiment, its table and plot; True once run."""

    add_arguments = staticmethod(_add_experiment)
    run = staticmethod(_run_experiment)


class Demo:
    """``rvguard demo``: the β sweep; True when the reference study's shape reproduces."""

    add_arguments = staticmethod(_add_demo)
    run = staticmethod(_run_demo)
