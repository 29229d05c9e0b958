"""`rvguard check`: judge a recorded trace against a contract (files at this edge).

The trace streams through the online `Monitor`, which remembers every
finished rid so that WF is judged over the whole file (memory: the live
requests plus about a hundred bytes per distinct rid, docs/performance.md);
the phase sweep, when asked, also keeps the accepted events in columnar
form. A refused line (a WF violation, an unknown tenant, a bad field) moves
no clock and fires no timer. Strict reading stops at the first bad line with a located
`TraceError`; lenient reading records every bad line by number, leaves it
out, and checks the rest — nothing is skipped silently.

A partitioned trace (a directory or glob of Parquet files, `rvguard.io.dataset`)
streams through the same monitor partition after partition: the report is
that of their concatenation, and an error names the partition and its row.
Memory is the monitor's (above) plus one record batch, whatever the number
of partitions. ``rvguard.check_parallel`` judges one on several processes.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from .attribution import Attributed, Attribution
from .columnar import ColumnarTrace
from .contract import Contract
from .errors import TraceError, TraceProtocolError
from .events import Event, EventKind
from .io import iter_records
from .io.dataset import is_dataset, partitions
from .io.segments import Deployment, Lost, deployments, history
from .lifecycle import INITIAL, Stage
from .monitors import DEFAULT_PROPERTIES, Metrics, Monitor
from .monitors.phase import PhaseSweep, phase_sweep
from .progress import display, showing, task
from .verdict import Violation

if TYPE_CHECKING:
    from .fleet.judge import FleetCredits, FleetCreditsSummary

__all__ = ["BadLine", "CheckReport", "check_trace", "check_traces"]

CLAIMS = {
    "AF": "monitored; the guard enforces it by construction",
    "DR": "monitored; the guard enforces it by construction",
    "WF": "monitored; the guard's output is well-formed by construction",
    "SF": "monitored; the guard ensures it only under the contract's preconditions (see rvguard verify)",
    "ND": "monitored; optional, needs the upper bound U",
    "FR": "monitored whenever the trace routes (bounds: the contract's fleet block, else each route's own); "
    "the gateway routes on views within its staleness bound and at most C_e per engine by construction",
    "RB": "monitored; the guard enforces it by construction (surplus holds at most C − R slots)",
    "CAP": "monitored; the guard enforces it by construction (at most C in flight; the fleet gateway at most "
    "C_e per engine)",
    "PR": "monitored; the guard never preempts or evicts a protected request (by construction); a shutdown "
    "that ends one is reported, not prevented",
    "RL": "monitored; the guard's core demotes surplus only, citing the traced sample that fires its "
    "redline (replayed from the trace), restores only on a fresh sample with the redline clear, toggles "
    "bounded by the redline's hysteresis (by construction)",
    "EV": "monitored; the Guard's emergency channel keeps it by construction (at most k in flight, "
    "surplus only; an emergency eviction records its headroom, the samples' Ĥ, below the hard floor, "
    "none while credited headroom reaches the target, exactly); the fleet gateway's moves off a dead "
    "engine are checked only",
    "ER": "monitored, not enforced: an emergency eviction's planned relief lands by the node's deadline "
    "(a miss says eviction cannot relieve the node in time)",
}
P95_NOTE = (
    "P95 is an ensemble obligation: this trace's assured P95 sojourn is estimated "
    "(window-bootstrap interval), not judged or enforced (see rvguard screen)"
)


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line left out under ``--lenient``: where, which field, why (``path``: the partition)."""

    line: int
    field: str
    reason: str
    path: str = ""  # set for a partitioned trace, where a line number alone is ambiguous

    def to_dict(self) -> dict[str, Any]:
        """The ``bad_lines`` item of ``--json`` (``path`` only for a partitioned trace)."""
        out: dict[str, Any] = {"line": self.line, "field": self.field, "reason": self.reason}
        return out | {"path": self.path} if self.path else out


@dataclass(frozen=True)
class CheckReport:
    """Everything `rvguard check` found: verdicts, metrics, bad lines, phase sweep."""

    trace: str
    properties: tuple[str, ...]
    violations: list[Violation]
    metrics: Metrics
    bad_lines: list[BadLine] = field(default_factory=list)
    phase: PhaseSweep | None = None
    seconds: float = 0.0
    fleet: FleetCreditsSummary | None = None
    lost: list[Lost] = field(default_factory=list)  # requests open at a restart (segmented traces)
    #: violations the trace's evidence attributes (`rvguard.attribution`): SF misses under a broken
    #: precondition, AF refusals with a declared reason; not in ``violations``, never silent
    attributed: list[Attributed] = field(default_factory=list)
    #: entitled admitted requests the client ended (``client-error``): SF exempts them
    client_faults: int = 0

    @property
    def holds(self) -> bool:
        """No violation (no guard fault) and no bad line."""
        return not self.violations and not self.bad_lines

    def sf_attribution(self) -> dict[str, int]:
        """SF's misses by cause: only ``guard_fault`` fails SF's claim."""
        broken = sum(1 for a in self.attributed if a.violation.property == "SF")
        faults = sum(1 for v in self.violations if v.property == "SF")
        return {"guard_fault": faults, "precondition_broken": broken, "client_fault": self.client_faults}

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object (DESIGN §8 names: ``violations`` and ``metrics``)."""
        return {
            "trace": self.trace,
            "holds": self.holds,
            "properties": {p: CLAIMS.get(p, "monitored (user-defined)") for p in self.properties},
            "violations": [v.to_dict() for v in self.violations],
            "attributed": [a.to_dict() for a in self.attributed],
            "sf_attribution": self.sf_attribution(),
            "af_declared": sum(1 for a in self.attributed if a.violation.property == "AF"),
            "metrics": self.metrics.to_dict(),
            "bad_lines": [b.to_dict() for b in self.bad_lines],
            "phase_sweep": None if self.phase is None else self.phase.to_dict(),
            "notes": [P95_NOTE],
            "seconds": self.seconds,
            **({} if self.fleet is None else {"fleet": _fleet_dict(self.fleet)}),  # several traces only
            **({"lost_at_restart": [x.to_dict() for x in self.lost]} if self.lost else {}),  # segments
        }


def _fleet_dict(f: FleetCreditsSummary) -> dict[str, Any]:
    return {
        "max_credits_per_window": f.max_credits,
        "windows": f.windows,
        "pooled_arrivals": f.pooled_arrivals,
        "entitled_by_pool": f.entitled_by_pool,
    }


def _line_count(path: str) -> int | None:
    """Lines in a text trace, counted in C-speed chunks (a percent needs a total); None for others."""
    if path == "-" or not os.path.isfile(path) or path.endswith((".parquet", ".pq")):
        return None
    count = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            count += chunk.count(b"\n")
    return count


def _protocol_error(v: Violation, path: str, line: int) -> TraceProtocolError:
    """The bad line a WF violation makes: the rid is at fault when it is unknown or arrives twice.

    Read from data, never from the prose: the lifecycle stage the request was
    in (the violation's ``location``) and the kind of the refused event.
    """
    stage = Stage(v.context["location"])
    kind = v.witness[-1].kind
    field_name = "rid" if stage is INITIAL or kind is EventKind.ARRIVE else "kind"
    return TraceProtocolError(v.detail, path=path, line=line, field=field_name)


def _records(path: str) -> Iterator[tuple[int, Event | TraceError]]:
    """The trace's records; under a progress display, a bar with percent and rate."""
    total = _line_count(path) if showing() else None
    with task(f"checking {os.path.basename(path)}", total=total, unit="line") as advance:
        done = last = 0
        for line, item in iter_records(path):
            if not line & 0xFFF:
                advance(line - done)
                done = line
            last = line
            yield line, item
        advance(last - done)


class _Run:
    """One pass over the records: feed, classify bad lines, keep events for the sweep."""

    def __init__(
        self,
        monitor: Monitor,
        path: str,
        *,
        lenient: bool,
        report_wf: bool,
        keep: bool,
        dataset: bool = False,
    ) -> None:
        self.monitor = monitor
        self.path = path  # the file being read: a partition's, for a partitioned trace
        self.dataset = dataset
        self.lenient = lenient
        self.report_wf = report_wf
        self.keep = keep
        self.bad: list[BadLine] = []
        self.kept: list[Event] = []
        self.lines: list[int] = []
        self.violations: list[Violation] = []
        self.evidence = Attribution(monitor.contract)
        self.routes = 0  # route records accepted: FR is reported when the trace routes

    def take(self, line: int, item: Event | TraceError) -> bool:
        """Feed one record; True when the monitor accepted it as an event."""
        try:
            if isinstance(item, TraceError):
                raise item
            found = self.monitor.feed(item)
        except TraceError as err:
            located = err.located(path=self.path, line=line) if not err.line else err
            if not self.lenient:
                raise located from None
            self.bad.append(self._bad(line, located.field, located.reason))
            return False
        wf_found = [v for v in found if v.property == "WF"]
        if wf_found:
            protocol = _protocol_error(wf_found[0], self.path, line)
            if not self.lenient:
                raise protocol
            self.bad.append(self._bad(line, protocol.field, wf_found[0].detail))
        self.violations.extend(v for v in found if v.property != "WF" or self.report_wf)
        if not wf_found:
            self.evidence.feed(item)
        if self.keep and not wf_found:
            self.kept.append(item)
            self.lines.append(line)
        self.routes += not wf_found and item.kind is EventKind.ROUTE
        return not wf_found

    def properties(self, asked: Sequence[str]) -> tuple[str, ...]:
        """The properties judged: those asked, and FR when the trace routes."""
        return (*asked, "FR") if self.routes and "FR" not in asked else tuple(asked)

    def judged(self) -> dict[str, Any]:
        """The report's verdict fields: guard faults as violations, the attributed apart."""
        faults, attributed = self.evidence.split(sorted(self.violations, key=lambda v: v.key))
        return {"violations": faults, "attributed": attributed, "client_faults": self.evidence.client_faults}

    def _bad(self, line: int, field_name: str, reason: str) -> BadLine:
        return BadLine(line, field_name, reason, self.path if self.dataset else "")

    def feed(self, records: Iterable[tuple[int, Event | TraceError]]) -> None:
        for line, item in records:
            self.take(line, item)


def _monitored(properties: Sequence[str]) -> list[str]:
    """The properties the monitor runs besides WF: those asked, and FR always (it takes no move of
    a request never routed, and is reported when the trace routes)."""
    return [p for p in properties if p not in ("WF", "FR")] + ["FR"]


def check_trace(
    path: str,
    contract: Contract,
    *,
    properties: Sequence[str] = DEFAULT_PROPERTIES,
    lenient: bool = False,
    phase_steps: int | None = None,
    progress: TextIO | None = None,
    records: Callable[[str], Iterator[tuple[int, Event | TraceError]]] | None = None,
) -> CheckReport:
    """Check one trace file, or a partitioned trace partition by partition.

    Args:
        path: a JSONL/CSV/Parquet trace (``-`` for JSONL on stdin), or a directory or glob of
            Parquet partitions (`rvguard.io.dataset`): streamed one partition, one record batch
            at a time, through the same monitor, so the verdicts are those of their concatenation.
        contract: the contract to judge against.
        properties: property names to report.
        lenient: leave bad lines out (recorded) instead of stopping.
        phase_steps: run the phase sweep with this many phases.
        progress: a stream for a progress bar (used only on terminals; the CLI shows one through
            `rvguard.progress` instead).
        records: override the reader (tests).

    Raises:
        TraceError: strict mode, at the first bad line (with file, line, field).
    """
    started = time.monotonic()
    monitor = Monitor(contract, ["WF", *_monitored(properties)], retain_finished=None)
    parts = partitions(path) if records is None and is_dataset(path) else None
    run = _Run(
        monitor,
        path,
        lenient=lenient,
        report_wf="WF" in properties,
        keep=phase_steps is not None,
        dataset=parts is not None,
    )
    shown = display(progress) if progress is not None and progress.isatty() else contextlib.nullcontext()
    with shown:
        if records is not None:
            run.feed(records(path))
        else:
            for part in parts or [path]:
                run.path = part
                run.feed(_records(part))
    sweep = None
    if phase_steps is not None:
        sweep = phase_sweep(ColumnarTrace.from_events(run.kept, lines=run.lines), contract, phase_steps)
    return CheckReport(
        trace=path,
        properties=run.properties(properties),
        **run.judged(),
        metrics=monitor.summary(),
        bad_lines=run.bad,
        phase=sweep,
        seconds=time.monotonic() - started,
    )


def _feed_merged(
    run: _Run,
    contract: Contract,
    deps: Sequence[Deployment],
    fleet: FleetCredits | None,
    lost: list[Lost],
    own: Sequence[str],
) -> None:
    """Feed the replicas' merged records to the run, AF's fleet count, and each replica's own FR (and
    ``own``: CAP, when asked)."""
    from .fleet.merge import merge_traces

    routing = {d.name: Monitor(contract, ["FR", *own], retain_finished=None) for d in deps}  # one replica's
    sources = [(d.name, ((line, item) for _, line, item in history(d, lost, iter_records))) for d in deps]
    for path, line, item in merge_traces(sources):
        run.path = path
        if run.take(line, item) and not isinstance(item, TraceError):
            run.violations.extend(routing[path].feed(item))
            if fleet is not None:
                run.violations.extend(fleet.feed(item))


#: judged on each replica's trace alone: its C − R, its redline's samples and toggles, its k
_PER_REPLICA = ("RB", "RL", "EV", "ER")


def _sweep(run: _Run, contract: Contract, steps: int | None) -> PhaseSweep | None:
    """The phase sweep over the kept events, when asked."""
    if steps is None:
        return None
    return phase_sweep(ColumnarTrace.from_events(run.kept, lines=run.lines), contract, steps)


def _feed_history(
    run: _Run, contract: Contract, deps: Sequence[Deployment], fleet: FleetCredits | None, own: Sequence[str]
) -> list[Lost]:
    """Feed the deployments' histories (merged when several); the requests lost at restarts."""
    lost: list[Lost] = []
    if len(deps) > 1:
        _feed_merged(run, contract, deps, fleet, lost, own)
        return lost
    for path, line, item in history(deps[0], lost, iter_records):
        run.path = path
        run.take(line, item)
    return lost


def _judged(
    deps: Sequence[Deployment], contract: Contract, properties: Sequence[str]
) -> tuple[list[str], list[str], FleetCredits | None]:
    """The properties reported, those the merged monitor runs, and AF's fleet count (several replicas)."""
    if len(deps) == 1:
        return list(properties), _monitored(properties), None
    from .fleet.judge import FleetCredits

    properties = [p for p in properties if p not in _PER_REPLICA]
    fleet = FleetCredits(contract) if "AF" in properties else None
    return properties, [p for p in properties if p not in ("AF", "WF", "FR", "CAP")], fleet  # per replica


def check_traces(
    paths: Sequence[str],
    contract: Contract,
    *,
    properties: Sequence[str] = DEFAULT_PROPERTIES,
    lenient: bool = False,
    phase_steps: int | None = None,
) -> CheckReport:
    """Check one deployment's trace, or several guard replicas' traces as one fleet.

    The files (a directory: its JSONL segments) are grouped by deployment
    (`rvguard.io.segments`): the segments a gateway wrote across restarts and
    rotations are read as one history, in order, a request open at a restart
    closed as ``lost-at-restart`` (`CheckReport.lost`). One deployment is checked
    as `check_trace` does; several are merged as a fleet by time
    (`rvguard.fleet.merge`): SF, DR and WF are
    judged per request on the merge, and AF fleet-wide (`rvguard.fleet.judge`):
    floor credit admitted per tenant and window ≤ B (one trace alone is held to the
    same B by the monitor's AF, `rvguard.monitors.af`), and every entitled arrival
    admitted, entitlement counted in the shared pool's order where the trace
    records it (``pool_arrived``). RB is left out: each replica holds its own
    C − R slots (ΣC_e − R over its engines), so it is judged on each replica's
    trace alone; so are RL (each replica's redline reads its own engines'
    samples) and EV (each its own k). FR and CAP are judged on each replica's events by a monitor of
    its own (C and C_e are one replica's allowance), fed alongside the merge; FR is reported when a
    trace routes. Errors are pinned to their own file and line.

    Raises:
        TraceError: strict mode, at the first bad line (with file, line, field).
    """
    deps = deployments(paths)
    if len(deps) == 1 and len(deps[0].paths) == 1:
        return check_trace(
            deps[0].paths[0], contract, properties=properties, lenient=lenient, phase_steps=phase_steps
        )
    started = time.monotonic()
    own = ["CAP"] if "CAP" in properties and len(deps) > 1 else []  # CAP: each replica's own C
    properties, judged, fleet = _judged(deps, contract, properties)
    monitor = Monitor(contract, ["WF", *judged], retain_finished=None)
    name = " + ".join(d.name for d in deps)
    run = _Run(
        monitor,
        name,
        lenient=lenient,
        report_wf="WF" in properties,
        keep=phase_steps is not None,
        dataset=True,
    )
    lost = _feed_history(run, contract, deps, fleet, own)
    return CheckReport(
        trace=name,
        properties=run.properties(properties),
        **run.judged(),
        metrics=monitor.summary(),
        bad_lines=run.bad,
        phase=_sweep(run, contract, phase_steps),
        seconds=time.monotonic() - started,
        fleet=None if fleet is None else fleet.summary(),
        lost=lost,
    )
