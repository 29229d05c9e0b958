"""The offline checker: whole-trace verdicts and metrics from columns.

For a trace whose protocol (WF) is clean, the built-in properties are
judged with numpy over per-request columns: O(n log n) for the grouping
sorts, no Python loop per event. A trace that breaks WF, or a set of
properties with a user-defined automaton, is judged by replaying the rows
through the online `Monitor` (with no horizon on finished rids), so both
paths give the same verdicts on every trace; tests check the difference.

The per-request columns live one floor down, in `rvguard.monitors.columns`
(re-exported here), so the verdict and metric modules read them without
importing this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..columnar import ColumnarTrace
from ..contract import Contract
from ..errors import TraceError, TraceOrderError
from ..facts import unknown_tenant
from ..verdict import Violation
from .automaton import TimedAutomaton
from .columns import (
    RequestTable,
    RowIndex,
    entitlement_columns,
    protocol_is_clean,
    request_table,
    row_index,
    window_indices,
)
from .metrics import Metrics
from .monitor import BUILTIN, DEFAULT_PROPERTIES, Monitor, resolve_properties
from .offline_metrics import offline_metrics
from .offline_verdicts import offline_violations

__all__ = [
    "OfflineResult",
    "RequestTable",
    "RowIndex",
    "check_offline",
    "entitlement_columns",
    "protocol_is_clean",
    "request_table",
    "row_index",
    "window_indices",
]


@dataclass(frozen=True)
class OfflineResult:
    """Verdicts and metrics of a whole trace; ``vectorised`` says which path ran."""

    violations: list[Violation]
    metrics: Metrics
    vectorised: bool


def _check_order(trace: ColumnarTrace, path: str) -> None:
    if len(trace) > 1:
        back = trace.t[1:] < trace.t[:-1]
        if back.any():
            i = int(np.argmax(back)) + 1
            raise TraceOrderError(
                f"time {trace.t[i]!r} is before the previous event's {trace.t[i - 1]!r}",
                path=path,
                line=int(trace.line[i]),
                field="t",
            )


def _check_tenants(trace: ColumnarTrace, contract: Contract, path: str) -> None:
    for code, name in enumerate(trace.tenant_names):
        if name not in contract.tenants:
            row = int(np.flatnonzero(trace.tenant == code)[0])
            raise unknown_tenant(contract, name).located(path=path, line=int(trace.line[row]))


def check_offline(
    trace: ColumnarTrace,
    contract: Contract,
    properties: Sequence[str | TimedAutomaton] = DEFAULT_PROPERTIES,
    *,
    path: str = "<memory>",
) -> OfflineResult:
    """Judge a whole trace; vectorised when its protocol is clean and properties are built-in.

    Raises:
        TraceOrderError: a timestamp goes backwards (with its line).
        UnknownTenantError: an arrive names a tenant outside the contract.
        SpecError: unknown properties, or ND without U.
    """
    autos = resolve_properties(contract, properties)
    builtin = all(BUILTIN.get(a.name) is a for a in autos)
    rows = row_index(trace) if builtin else None
    if rows is None or not protocol_is_clean(trace, rows):
        # the monitor's own rules: a refused row moves no clock, so order is judged on the rest
        return _replay(trace, contract, properties, path)
    _check_order(trace, path)
    _check_tenants(trace, contract, path)
    req = request_table(trace, contract, rows)
    ent = entitlement_columns(req, trace, contract)
    names = {a.name for a in autos}
    violations = offline_violations(trace, contract, req, ent, names)
    metrics = offline_metrics(trace, contract, req, ent)
    return OfflineResult(sorted(violations, key=lambda v: v.key), metrics, vectorised=True)


def _replay(
    trace: ColumnarTrace, contract: Contract, properties: Sequence[str | TimedAutomaton], path: str
) -> OfflineResult:
    monitor = Monitor(contract, properties, retain_finished=None)
    for line, ev in zip(trace.line.tolist(), trace.events(), strict=True):
        try:
            monitor.feed(ev)
        except TraceError as err:
            raise err.located(path=path, line=int(line)) from None
    return OfflineResult(monitor.violations(), monitor.summary(), vectorised=False)
