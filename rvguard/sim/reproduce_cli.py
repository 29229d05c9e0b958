"""``rvguard reproduce`` (also ``rvguard experiment reproduce``): every experiment, then one table.

A thin driver over `rvguard.sim.reproduce.reproduce`; declared in `rvguard.sim.commands`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import SpecError

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--out DIR`` (required), ``--reps``, ``--seed``, ``--engine-results DIR``, ``--quick``."""
    p.add_argument("--out", required=True, help="directory for sim/*.json and reproduction.md")
    p.add_argument("--reps", type=int, default=None, help="runs per condition (default: each experiment's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--engine-results", default=None, help="DIR of `rvguard experiment NAME --backend URL --json` outputs"
    )
    p.add_argument("--quick", action="store_true", help="1 rep and short replays: the table's shape only")


def run(args: argparse.Namespace) -> bool:
    """Run everything and write the table; True once written.

    Raises:
        SpecError: ``--reps`` below 1, ``--out`` a file, ``--engine-results`` not a directory.
    """
    from .plots import check_out_dir
    from .reproduce import reproduce

    if args.reps is not None and args.reps < 1:
        raise SpecError(f"--reps must be at least 1, got {args.reps}", field="reps")
    check_out_dir(args.out)
    if args.engine_results is not None and not Path(args.engine_results).is_dir():
        raise SpecError(f"--engine-results {args.engine_results}: not a directory", field="--engine-results")
    table = reproduce(
        args.out,
        reps=args.reps,
        seed=args.seed,
        engine=args.engine_results,
        quick=args.quick,
        progress=lambda s: print(f"reproduce: {s}", file=sys.stderr, flush=True),
    )
    print(f"table: {table}")
    return True
