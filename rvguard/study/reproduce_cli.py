"""``rvguard reproduce`` (also ``rvguard experiment reproduce``): every experiment, then one table.

A thin driver over `rvguard.study.reproduce.reproduce`; declared in `rvguard.study.commands`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import SpecError

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options: ``--out DIR`` (required), reps, seed, engine and earlier simulator results, quick."""
    p.add_argument("--out", required=True, help="directory for sim/*.json and reproduction.md")
    p.add_argument("--reps", type=int, default=None, help="runs per condition (default: each experiment's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--engine-results", default=None, help="DIR of `rvguard experiment NAME --backend URL --json` outputs"
    )
    p.add_argument("--quick", action="store_true", help="1 rep and short replays: the table's shape only")
    p.add_argument(
        "--sim-results", default=None, help="DIR of an earlier run's sim/*.json: re-render, not rerun"
    )


def run(args: argparse.Namespace) -> bool:
    """Run everything and write the table; True once written.

    Raises:
        SpecError: ``--reps`` below 1, ``--out`` a file, ``--engine-results`` not a directory.
    """
    from ..sim.plots import check_out_dir
    from .reproduce import reproduce

    if args.reps is not None and args.reps < 1:
        raise SpecError(f"--reps must be at least 1, got {args.reps}", field="reps")
    check_out_dir(args.out)
    for option, value in (("--engine-results", args.engine_results), ("--sim-results", args.sim_results)):
        if value is not None and not Path(value).is_dir():
            raise SpecError(f"{option} {value}: not a directory", field=option)
    table = reproduce(
        args.out,
        reps=args.reps,
        seed=args.seed,
        engine=args.engine_results,
        quick=args.quick,
        sim=args.sim_results,
        progress=lambda s: print(f"reproduce: {s}", file=sys.stderr, flush=True),
    )
    print(f"table: {table}")
    return True
