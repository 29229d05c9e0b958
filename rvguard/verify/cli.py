"""``rvguard verify SPEC [--synthesize floor|deadline|slots|reserve] [--tenant NAME] [--json]``.

A thin driver over `rvguard.verify.preconditions` and `rvguard.verify.synthesis`, declared in
`rvguard.verify.commands`. `run` is True when every obligation holds (exit 0) and False
when one fails (exit 1); an unreadable or invalid contract, an unknown tenant or a missing
z3-solver raises (exit 2, mapped by `rvguard.cli`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from ..contract import load_contract
from ..errors import SpecError
from .assumptions import BACKLOG, short
from .encoding import VerifyOptions
from .obligations import ObligationResult
from .preconditions import all_hold, verify_contract
from .synthesis import PARAMETERS, SynthesisResult, synthesize

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard verify``."""
    p.description = (
        "Prove the contract's preconditions (A4 stability, the deadline bound, the "
        "service envelope, DR soundness) or show a counterexample and the fields that conflict."
    )
    p.add_argument("spec", metavar="SPEC", nargs="?", help="contract file (.yaml, .yml or .json)")
    p.add_argument(
        "--properties",
        action="append",
        metavar="FILE",
        help="check property tables' Z3 obligations instead ('builtin' for the built-in ones; repeatable)",
    )
    p.add_argument("--synthesize", choices=PARAMETERS, help="optimise one parameter, the others fixed")
    p.add_argument("--tenant", metavar="NAME", help="tenant to synthesise for (default: first floored)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--assume-backlog",
        action="store_true",
        help="check the deadlines under the refuted backlog assumption (at most one window's floor in "
        "the system at an arrival); the verdict then holds only under it",
    )


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> bool:
    """Run ``rvguard verify`` with parsed arguments; True when every obligation holds."""
    out = sys.stdout if out is None else out
    if getattr(args, "properties", None):
        from ..properties.commands import verify_properties

        return verify_properties(args.properties, as_json=args.json, out=out)
    if args.spec is None:
        raise SpecError("give a contract file (SPEC) or --properties FILE", field="spec")
    contract = load_contract(args.spec)
    assume = bool(getattr(args, "assume_backlog", False))
    options = VerifyOptions(backlog_assumption=assume)
    results = verify_contract(contract, options=options)
    synthesis = None
    if args.synthesize is not None:
        synthesis = synthesize(contract, args.synthesize, getattr(args, "tenant", None), options=options)
    if args.json:
        doc = _as_json(results, synthesis)
        doc["assumptions"] = [BACKLOG] if assume else []
        doc["verdict"] = _verdict(results, assume)
        print(json.dumps(doc, ensure_ascii=False, indent=2), file=out)
    else:
        _print_text(str(args.spec), results, synthesis, out, assume=assume)
    return all_hold(results)


def _verdict(results: list[ObligationResult], assume: bool) -> str:
    """The verdict line: how many fail, or that all hold (and under what, with --assume-backlog)."""
    failed = [r for r in results if not r.holds]
    if failed:
        return f"{len(failed)} of {len(results)} obligations fail: the contract is outside the proven region"
    if assume:
        return (
            f"all {len(results)} obligations hold, proven only under the backlog assumption "
            "(refuted by proofs/backlog_lemma.py): not a proof for this contract"
        )
    return f"all {len(results)} obligations hold: the contract is inside the proven region"


def _as_json(results: list[ObligationResult], synthesis: SynthesisResult | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"obligations": [r.to_json() for r in results]}
    if synthesis is not None:
        doc["synthesis"] = synthesis.to_json()
    return doc


def _print_text(
    spec: str,
    results: list[ObligationResult],
    synthesis: SynthesisResult | None,
    out: TextIO,
    *,
    assume: bool = False,
) -> None:
    print(f"{spec}: {_verdict(results, assume)}", file=out)
    for r in results:
        print(f"  {'ok  ' if r.holds else 'FAIL'}  {r.name}: {r.message}", file=out)
        if not r.holds and r.fields:
            print(f"        fields: {', '.join(r.fields)}", file=out)
        if r.assumptions:
            print(f"        assumes: {', '.join(map(short, r.assumptions))}", file=out)
    legend = dict.fromkeys(a for r in results for a in r.assumptions)
    if legend:
        print("assumptions:", file=out)
        for a in legend:
            print(f"  {a}", file=out)
    if synthesis is not None:
        print(f"synthesis: {synthesis.message}", file=out)
