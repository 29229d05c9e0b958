"""``rvguard check TRACE --contract SPEC``: a thin driver over `rvguard.check` (DESIGN §8).

Exit codes: 0 every property holds; 1 a violation (a guard fault); 2 bad input; 3 no guard
fault, but misses the trace attributes (SF misses while a precondition was broken, AF refusals
with a declared reason: a floor lowering, a credit pool's refusal; a ``--property`` table broken
because a floor admission or dispatch went first, with the trace's ``shield`` alert at that
event). 3 is neither 0 (a run whose engine broke the contract's envelope must not pass a script as
a clean one) nor 1 (the guard is not at fault).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ..errors import SpecError
from .exits import EXIT_ATTRIBUTED

if TYPE_CHECKING:
    from ..check import CheckReport
    from ..contract import Contract
    from ..properties.report import TableReport

__all__ = ["MAX_PHASES", "add_arguments", "run"]

MAX_PHASES = 10_000  # the sweep re-judges the whole trace once a phase


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard check``."""
    p.epilog = (
        "exit codes: 0 every property holds; 1 a violation the guard is at fault for; 2 bad input; "
        "3 no guard fault, but attributed misses: SF misses while a precondition of the contract "
        "was broken (an alert of the watch, or recomputed from the trace: a service above s_max, "
        "assured backlog above B or above what the deadline covers), AF refusals the trace declares "
        "(a floor lowering, a credit pool's refusal), --property tables broken because a floor "
        "admission or dispatch went first "
        "(declared by the trace's shield alert at that event; without the alert: a violation, 1). "
        "Misses the client caused (client-error) are counted apart and never fail."
    )
    p.add_argument(
        "trace",
        nargs="+",
        help="trace file: .jsonl, .csv or .parquet ('-' = JSONL on stdin); or a directory or glob of "
        "Parquet partitions, checked as their concatenation; several traces: guard replicas' traces, "
        "merged and judged as one fleet (AF fleet-wide, in the shared pool's order)",
    )
    p.add_argument("--contract", required=True, help="contract file (.yaml or .json)")
    p.add_argument("--phase-sweep", type=int, metavar="N", help="re-judge at N window origins in [0, W)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--lenient", action="store_true", help="leave bad lines out (reported), check the rest")
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="check the Parquet partitions in parallel on a local Dask cluster of N workers (rvguard[dask])",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="check the Parquet partitions on an existing Dask cluster, e.g. tcp://10.0.0.5:8786",
    )
    p.add_argument(
        "--property",
        action="append",
        metavar="FILE",
        help="also judge the property tables in FILE (repeatable; 'builtin' for the built-in tables)",
    )
    p.add_argument(
        "--properties",
        default="AF,SF,DR,WF,RB,CAP",
        help="comma-separated properties to report (AF, SF, DR, WF, ND, RB, CAP; PR, RL, EV, ER, FR of the "
        "runbook: RL needs the contract's headroom block, EV and ER its eviction block); "
        "default AF,SF,DR,WF,RB,CAP, and FR whenever the trace routes",
    )


def _properties(text: str) -> list[str]:
    props = [p.strip() for p in text.split(",") if p.strip()]
    if not props:
        raise SpecError(
            "--properties names no property: give some of AF, SF, DR, WF, ND, RB, CAP, PR, RL, EV, ER, FR",
            field="properties",
        )
    return props


def _parallel(args: argparse.Namespace, contract: Contract, props: list[str]) -> CheckReport:
    """``--workers`` / ``--scheduler``: the partitions on Dask (strict reading, no phase sweep)."""
    from ..check_parallel import check_partitioned

    if len(args.trace) > 1:
        raise SpecError(
            "--workers/--scheduler check one partitioned trace: give one directory or glob", field="trace"
        )
    for flag, given in (("--lenient", args.lenient), ("--phase-sweep", args.phase_sweep is not None)):
        if given:
            raise SpecError(
                f"{flag} reads the trace in one process: leave out --workers/--scheduler", field=flag[2:]
            )
    return check_partitioned(
        args.trace[0], contract, properties=props, workers=args.workers, scheduler=args.scheduler
    )


def run(args: argparse.Namespace) -> bool | int:
    """Judge the trace: True when no property is violated and nothing is attributed, False on a
    guard fault, `EXIT_ATTRIBUTED` (3) when the only misses are attributed (module doc)."""
    from ..check import check_traces
    from ..contract import load_contract
    from ..report import render_check

    contract = load_contract(args.contract)
    props = _properties(args.properties)
    if args.phase_sweep is not None and not 1 <= args.phase_sweep <= MAX_PHASES:
        raise SpecError(
            f"--phase-sweep wants 1..{MAX_PHASES} phases, got {args.phase_sweep} (each re-judges the trace)",
            field="phase_sweep",
            value=args.phase_sweep,
        )
    if args.workers is not None or args.scheduler is not None:
        report = _parallel(args, contract, props)
    else:
        report = check_traces(
            args.trace,
            contract,
            properties=props,
            lenient=args.lenient,
            phase_steps=args.phase_sweep,
        )
    tables = _tables(args, contract)
    if args.json:
        doc = report.to_dict() | ({} if tables is None else {"tables": tables.to_dict()})
        print(json.dumps(doc, indent=2, allow_nan=False, default=str))
    else:
        print(render_check(report) + ("" if tables is None else "\n" + tables.render()))
    holds = report.holds and (tables is None or tables.holds)
    if holds and (report.attributed or (tables is not None and tables.declared)):
        return EXIT_ATTRIBUTED
    return holds


def _tables(args: argparse.Namespace, contract: Contract) -> TableReport | None:
    """The ``--property`` tables' verdicts on the (single) trace, or None without them."""
    if not getattr(args, "property", None):
        return None
    from ..properties.report import judge_file

    if len(args.trace) != 1:
        raise SpecError("--property judges one trace file", field="property")
    return judge_file(args.trace[0], contract, args.property)
