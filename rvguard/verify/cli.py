"""``rvguard verify SPEC [--synthesize floor|deadline|slots] [--tenant NAME] [--json]``.

A thin driver over `rvguard.verify.check` and `rvguard.verify.synthesis`;
the top-level ``rvguard/cli.py`` wires `add_parser` and `run` in.

Exit status (DESIGN §8): 0 every obligation holds, 1 an obligation fails,
2 bad input (an unreadable or invalid contract, an unknown tenant, or
z3-solver missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from ..contract import load_contract
from ..errors import MissingExtraError, SpecError
from .check import STRADDLE_NOTE, all_hold, verify_contract
from .encoding import VerifyOptions
from .obligations import ObligationResult
from .synthesis import PARAMETERS, SynthesisResult, synthesize

__all__ = ["add_parser", "run"]

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``verify`` sub-command to an ``argparse`` sub-parser collection.

    Args:
        subparsers: the object returned by ``ArgumentParser.add_subparsers()``.

    Returns:
        The new sub-parser (the caller may ``set_defaults`` on it).
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "verify",
        help="check a contract's preconditions with Z3",
        description="Prove the contract's preconditions (A4 stability, the deadline bound, the "
        "service envelope, DR soundness) or show a counterexample and the fields that conflict.",
    )
    p.add_argument("spec", metavar="SPEC", help="contract file (.yaml, .yml or .json)")
    p.add_argument("--synthesize", choices=PARAMETERS, help="optimise one parameter, the others fixed")
    p.add_argument("--tenant", metavar="NAME", help="tenant to synthesise for (default: first floored)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--no-backlog-assumption",
        action="store_true",
        help="drop the reference study's Q_A ≤ B assumption: also check the two-cohort deadline bound",
    )
    return p


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``rvguard verify`` with parsed arguments; return the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        contract = load_contract(args.spec)
        assume = not getattr(args, "no_backlog_assumption", False)
        options = VerifyOptions(backlog_assumption=assume)
        results = verify_contract(contract, options=options)
        synthesis = None
        if args.synthesize is not None:
            synthesis = synthesize(contract, args.synthesize, getattr(args, "tenant", None), options=options)
    except (SpecError, MissingExtraError) as exc:
        print(f"rvguard verify: error: {exc}", file=err)
        return EXIT_INPUT
    if args.json:
        doc = _as_json(results, synthesis)
        doc["assumptions"] = [STRADDLE_NOTE] if assume else []
        print(json.dumps(doc, ensure_ascii=False, indent=2), file=out)
    else:
        _print_text(str(args.spec), results, synthesis, out)
        if assume:
            print(f"note: {STRADDLE_NOTE}", file=out)
    return EXIT_OK if all_hold(results) else EXIT_FAIL


def _as_json(results: list[ObligationResult], synthesis: SynthesisResult | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"obligations": [r.to_json() for r in results]}
    if synthesis is not None:
        doc["synthesis"] = synthesis.to_json()
    return doc


def _print_text(
    spec: str, results: list[ObligationResult], synthesis: SynthesisResult | None, out: TextIO
) -> None:
    failed = [r for r in results if not r.holds]
    if failed:
        head = f"{len(failed)} of {len(results)} obligations fail: the contract is outside the proven region"
    else:
        head = f"all {len(results)} obligations hold: the contract is inside the proven region"
    print(f"{spec}: {head}", file=out)
    for r in results:
        print(f"  {'ok  ' if r.holds else 'FAIL'}  {r.name}: {r.message}", file=out)
        if not r.holds and r.fields:
            print(f"        fields: {', '.join(r.fields)}", file=out)
    if synthesis is not None:
        print(f"synthesis: {synthesis.message}", file=out)
