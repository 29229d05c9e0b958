"""The `rvguard` command line: thin drivers over the library (DESIGN §8).

Exit codes: 0 = holds, 1 = a property or obligation fails, 2 = bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .contract import load_contract
from .errors import MissingExtraError, RvguardError, SpecError, TraceError

__all__ = ["main"]

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
MAX_PHASES = 10_000  # the sweep re-judges the whole trace once a phase


def _add_check(sub: Any) -> None:
    p = sub.add_parser("check", help="judge a recorded trace against a contract")
    p.add_argument("trace", help="trace file: .jsonl, .csv or .parquet ('-' = JSONL on stdin)")
    p.add_argument("--contract", required=True, help="contract file (.yaml or .json)")
    p.add_argument("--phase-sweep", type=int, metavar="N", help="re-judge at N window origins in [0, W)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--lenient", action="store_true", help="leave bad lines out (reported), check the rest")
    p.add_argument(
        "--properties",
        default="AF,SF,DR,WF",
        help="comma-separated properties to report (AF, SF, DR, WF, ND); default AF,SF,DR,WF",
    )
    p.set_defaults(run=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    from .check import check_trace
    from .report import render_check

    contract = load_contract(args.contract)
    props = [p.strip() for p in args.properties.split(",") if p.strip()]
    if not props:
        raise SpecError("--properties names no property: give some of AF, SF, DR, WF, ND", field="properties")
    if args.phase_sweep is not None and not 1 <= args.phase_sweep <= MAX_PHASES:
        raise SpecError(
            f"--phase-sweep wants 1..{MAX_PHASES} phases, got {args.phase_sweep} (each re-judges the trace)",
            field="phase_sweep",
            value=args.phase_sweep,
        )
    report = check_trace(
        args.trace,
        contract,
        properties=props,
        lenient=args.lenient,
        phase_steps=args.phase_sweep,
        progress=sys.stderr,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False, default=str))
    else:
        print(render_check(report))
    return EXIT_OK if report.holds else EXIT_FAIL


def _optional(module: str, sub: Any) -> None:
    """Wire a subcommand whose module may not exist yet in this build."""
    import importlib

    parent = module.rsplit(".", 1)[0]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name not in (module, parent):
            raise
        return
    parser = mod.add_parser(sub)
    if isinstance(parser, argparse.ArgumentParser) and parser.get_default("run") is None:
        parser.set_defaults(run=mod.run)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="rvguard", description="A trusted floor under an untrusted learner."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_check(sub)
    for module in ("rvguard.verify.cli", "rvguard.sim.cli", "rvguard.screen.cli", "rvguard.gateway.cli"):
        _optional(module, sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 holds, 1 fails, 2 bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (SpecError, TraceError, MissingExtraError) as err:
        print(f"rvguard {args.command}: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as the Python docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return EXIT_OK
    except OSError as err:  # a missing, unreadable or directory path: bad input, not a crash
        where = f"{err.filename}: " if err.filename else ""
        print(f"rvguard {args.command}: error: {where}{err.strerror or err}", file=sys.stderr)
        return EXIT_INPUT
    except RvguardError as err:
        print(f"rvguard {args.command}: error: {err}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
