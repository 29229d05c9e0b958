"""The assumption watch's trace record (DESIGN §12): a precondition stopped, or started again, holding.

A `Watch` record is a node event like `rvguard.events.Sample`: it concerns the guard's
preconditions, not one request, so it has no rid (its ``rid`` attribute is the empty string).
``condition`` names what broke (`CONDITIONS`), ``value`` the measured figure, ``bound`` the figure
it broke, ``since`` the instant the condition began (a service breach began at its dispatch plus
the ceiling, a capacity shortfall at the first short window). ``floor_scale``, when present, is
the factor every floor is multiplied by from ``t`` on: a declared floor lowering (``degrade``),
or 1 when a ``clear`` restores the floor. `rvguard check` reads these records to attribute SF
misses and to judge AF against the floor in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any, ClassVar

from ._record import record
from .bounds import MAX_DOUBLE, MAX_TIME, shown
from .errors import TraceFormatError
from .lifecycle import ALERT, EventKind

__all__ = [
    "ARRIVAL_GAP",
    "BACKLOG",
    "CAPACITY",
    "CLEAR",
    "CONDITIONS",
    "FLOOR_LOWERED",
    "FLOOR_REFUSED",
    "NOT_PRECONDITIONS",
    "SERVICE",
    "SERVICE_LOW",
    "SHIELD",
    "UPSTREAM_EJECTED",
    "UPSTREAM_RESTORED",
    "Watch",
    "watch_from_dict",
]

SERVICE = "service"  # a service above its ceiling (s_max, or s_max_opp): SF's envelope
SERVICE_LOW = "service-low"  # a service below its lower bound L(R): DR's soundness assumption
CAPACITY = "capacity"  # estimated capacity below the floored demand Σ B / W (A4)
BACKLOG = "backlog"  # assured backlog Q_A above `Contract.backlog_bound` (Σ B, or what D covers)
ARRIVAL_GAP = "arrival-gap"  # a request waited longer than the bound before the gateway ran it
CLEAR = "clear"  # every firing condition holds again
#: a property table's shield disagreed with an event that went out (shadow, or a built-in guarantee
#: that comes first) or a table was broken by an event the guard does not decide; no precondition of SF
SHIELD = "shield"
#: an upstream answered failures to that many real requests in a row and is out of rotation (or,
#: restored, back in): the gateway's passive health (`rvguard.gateway.outlier`); no precondition of SF
UPSTREAM_EJECTED = "upstream-ejected"
UPSTREAM_RESTORED = "upstream-restored"
#: the conditions an alert record may name
CONDITIONS = frozenset(
    {SERVICE, SERVICE_LOW, CAPACITY, BACKLOG, ARRIVAL_GAP, CLEAR, SHIELD, UPSTREAM_EJECTED, UPSTREAM_RESTORED}
)
#: conditions that are no precondition of SF (the checker attributes no miss to them)
NOT_PRECONDITIONS = frozenset({SERVICE_LOW, SHIELD, UPSTREAM_EJECTED, UPSTREAM_RESTORED})

#: the field an admit or reject of a floor-entitled request carries when it did not get the floor:
#: why (a shared pool's verdict, or `FLOOR_LOWERED`); `rvguard check` reports the AF violation as a
#: declared exception when the trace bears it out (`rvguard.attribution`)
FLOOR_REFUSED = "floor_refused"
FLOOR_LOWERED = "floor-lowered"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


@record(frozen=True, unsafe_hash=True)
class Watch:
    """One alert of the assumption watch (see module doc): a node event, no request."""

    t: float
    condition: str
    value: float = 0.0
    bound: float = 0.0
    since: float | None = None
    floor_scale: float | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    rid: ClassVar[str] = ""  # a node event: no request (no real rid is empty)
    kind: ClassVar[EventKind] = EventKind.ALERT
    code: ClassVar[int] = ALERT


def _number(rec: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    """An optional number in [low, high] (compared before any float cast, so a huge int is refused)."""
    value = rec.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise TraceFormatError(f"must be a number in [{low:g}, {high:g}], got {shown(value)}", field=name)
    return float(value)


def watch_from_dict(rec: Mapping[str, Any], t: float, extra: Mapping[str, Any]) -> Watch:
    """An ``alert`` record's event (`rvguard.events.event_from_dict` calls it).

    Raises:
        TraceFormatError: an unknown condition, a value not a finite number, a time out of range.
    """
    condition = rec.get("condition")
    if not isinstance(condition, str) or condition not in CONDITIONS:
        known = ", ".join(sorted(CONDITIONS))
        raise TraceFormatError(f"must be one of {known}, got {shown(condition)}", field="condition")
    value = _number(rec, "value", -MAX_DOUBLE, MAX_DOUBLE)
    bound = _number(rec, "bound", -MAX_DOUBLE, MAX_DOUBLE)
    since = _number(rec, "since", 0.0, MAX_TIME)
    scale = _number(rec, "floor_scale", 0.0, 1.0)
    return Watch(t, condition, value or 0.0, bound or 0.0, since, scale, extra)
