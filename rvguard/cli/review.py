"""``rvguard review TRACE [LOG] --contract SPEC``: a thin driver over `rvguard.review`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..contract import Contract
    from ..enforce.redline import RedlineConfig

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard review``."""
    p.add_argument("trace", help="trace file: .jsonl, .csv or .parquet ('-' = JSONL on stdin)")
    p.add_argument("log", nargs="?", help="the guard's alert log (JSON lines, rvguard.enforce.alertlog)")
    p.add_argument("--contract", required=True, help="contract file (.yaml or .json)")
    p.add_argument(
        "--confirm",
        type=int,
        default=2,
        help="raw samples below h_min that confirm a redline trigger (default 2)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> bool:
    """Review the trace; True when no fixed parameter proved wrong."""
    from ..contract import load_contract
    from ..errors import SpecError
    from ..review import render_review, review_trace

    if args.confirm < 1:
        raise SpecError(f"--confirm must be ≥ 1, got {args.confirm}", field="confirm", value=args.confirm)
    contract = load_contract(args.contract)
    redline = _redline(contract)
    report = review_trace(args.trace, contract, log=args.log, redline=redline, confirm=args.confirm)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, allow_nan=False, default=str))
    else:
        print(render_review(report))
    return report.holds


def _redline(contract: Contract) -> RedlineConfig | None:
    """The redline configuration of the contract's ``headroom`` block, if it has one."""
    from ..enforce.redline import redline_config

    return None if contract.headroom is None else redline_config(contract.headroom)
