"""``rvguard review TRACE [LOG] --contract SPEC``: a thin driver over `rvguard.review`."""

from __future__ import annotations

import argparse
import json

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard review``."""
    p.add_argument("trace", help="trace file: .jsonl, .csv or .parquet ('-' = JSONL on stdin)")
    p.add_argument("log", nargs="?", help="the guard's alert log (JSON lines, rvguard.enforce.alertlog)")
    p.add_argument("--contract", required=True, help="contract file (.yaml or .json)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> bool:
    """Review the trace; True when no fixed parameter proved wrong."""
    from ..contract import load_contract
    from ..review import render_review, review_trace

    report = review_trace(args.trace, load_contract(args.contract), log=args.log)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False, default=str))
    else:
        print(render_review(report))
    return report.holds
