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
from .lifecycle import ALERT, EventKind

__all__ = [
    "ARRIVAL_GAP",
    "BACKLOG",
    "CAPACITY",
    "CLEAR",
    "CONDITIONS",
    "SERVICE",
    "SERVICE_LOW",
    "Watch",
]

SERVICE = "service"  # a service above its ceiling (s_max, or s_max_opp): SF's envelope
SERVICE_LOW = "service-low"  # a service below its lower bound L(R): DR's soundness assumption
CAPACITY = "capacity"  # estimated capacity below the floored demand Σ B / W (A4)
BACKLOG = "backlog"  # assured backlog Q_A above Σ B (the backlog precondition)
ARRIVAL_GAP = "arrival-gap"  # a request waited longer than the bound before the gateway ran it
CLEAR = "clear"  # every firing condition holds again
#: the conditions an alert record may name
CONDITIONS = frozenset({SERVICE, SERVICE_LOW, CAPACITY, BACKLOG, ARRIVAL_GAP, CLEAR})

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
