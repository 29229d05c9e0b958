"""``rvguard experiment NAME``: a registered experiment on the simulator or, with ``--backend``, an engine.

Declared in `rvguard.study.commands` (this part may import the gateway, which
the simulator's floor may not): `Experiment` follows the CLI's plugin
protocol. On the simulator it is `rvguard.sim.cli.run_experiment`, with
``--profile`` choosing the simulated backend; ``--backend URL`` hands the
experiment's arms to `rvguard.study.live.LiveRunner` instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import SpecError
from ..sim.catalog import EXPERIMENTS
from ..sim.cli import render_table, run_experiment
from ..sim.plots import check_out_dir, pyplot

__all__ = ["Experiment"]


def _add_experiment(e: argparse.ArgumentParser) -> None:
    """The experiment's options: its name, contract, reps, seed, output, and where it runs."""
    e.add_argument("name", choices=sorted(EXPERIMENTS))
    e.add_argument("--spec", default=None, help="contract (default: the marquee contract)")
    e.add_argument("--reps", type=int, default=None, help="runs per condition (default: the experiment's)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--out", default="results", help="directory for the PNG plot")
    e.add_argument("--json", action="store_true")
    e.add_argument(
        "--profile", default=None, help="simulated backend: study-v100 | vllm-cpu | calibrate JSON"
    )
    e.add_argument("--backend", default=None, help="run on a real engine at URL, through the gateway")
    e.add_argument("--calibration", default=None, help="with --backend: its calibrate --json (else measured)")


def _runner(args: argparse.Namespace) -> Any:
    """How the arms run: the simulator (with ``--profile``) or the real engine at ``--backend``."""
    if args.backend is None:
        if args.calibration is not None:
            raise SpecError("--calibration applies only with --backend", field="--calibration")
        if args.profile is None:
            return None
        from functools import partial

        from ..sim.profiles import load_profile
        from ..sim.runner import run_arms

        return partial(run_arms, model=load_profile(args.profile))
    if args.profile is not None:
        raise SpecError(
            "--profile is the simulator's backend; --backend runs the real one", field="--profile"
        )
    from .live import live_runner

    return live_runner(
        args.backend, args.calibration, progress=lambda s: print(s, file=sys.stderr, flush=True)
    )


def _run_experiment(args: argparse.Namespace) -> bool:
    check_out_dir(args.out)
    pyplot()  # the plot needs the sim extra: refuse now, not after the runs
    result, plot = run_experiment(args.name, args.spec, args.reps, args.seed, args.out, _runner(args))
    if args.json:
        print(json.dumps({**result.to_dict(), "plot": str(plot)}, indent=2))
    else:
        print(render_table(result))
        print(f"plot: {plot}")
    return True


class Experiment:
    """``rvguard experiment NAME``: one registered experiment, its table and plot; True once run."""

    add_arguments = staticmethod(_add_experiment)
    run = staticmethod(_run_experiment)
