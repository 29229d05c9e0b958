"""The event records of the runbook mechanisms (DESIGN §10): headroom, demotion, eviction, routing.

`rvguard.events` re-exports them beside DESIGN §2's records and parses
them; the lifecycle (`rvguard.lifecycle`) says where each may occur. A
`Sample` is a node event: it concerns the engine, not a request, so its
record has no rid and its ``rid`` attribute is the empty string (no
request's rid is empty). Each record keeps unknown fields in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar

from ._record import record
from .lifecycle import ALERT, DEMOTE, EVICT, RELOCATE, RESTORE, ROUTE, SAMPLE, STALL, EventKind

__all__ = [
    "EMERGENCY",
    "RECORD_FIELDS",
    "VOLUNTARY",
    "Demote",
    "Evict",
    "Relocate",
    "Restore",
    "Route",
    "RouteMode",
    "Sample",
    "Stall",
]

#: the ``evict`` reason of an eviction past the hard floor (EV judges its credited headroom)
EMERGENCY = "emergency"
#: the ``evict`` reason of an eviction the crossover rule chose (keeping costs more than moving)
VOLUNTARY = "voluntary"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


@record(frozen=True, unsafe_hash=True)
class Sample:
    """A headroom reading of one engine resource (DESIGN §10): a node event, no request.

    ``value`` is the headroom fraction in [0, 1] (1 = all free); ``sample_time``
    the reading's own timestamp (the scrape's or the payload's), which the
    redline's freshness and trend are computed from, not ``t``.
    """

    t: float
    resource: str
    value: float
    sample_time: float
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    rid: ClassVar[str] = ""  # a node event: no request (no real rid is empty)
    kind: ClassVar[EventKind] = EventKind.SAMPLE
    code: ClassVar[int] = SAMPLE


@record(frozen=True, unsafe_hash=True)
class Stall:
    """The Guard's event loop ran ``lag`` seconds late (from ``since`` to ``t``): a node event.

    Nothing the loop timed in that span (a deadline, a learner's timeout, a trace stamp) was
    seen on time; the watchdog (`rvguard.enforce.stall`) records it so a stall is never invisible.
    """

    t: float
    lag: float
    since: float
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    rid: ClassVar[str] = ""  # a node event: no request
    kind: ClassVar[EventKind] = EventKind.STALL
    code: ClassVar[int] = STALL


class RouteMode(StrEnum):
    """How a request's engine was chosen."""

    P2C = "p2c"  # power of two choices on the fleet's headroom view
    SILOED = "siloed"  # the fallback: a fixed engine by a stated rule, no shared view


@record(frozen=True, unsafe_hash=True)
class Route:
    """The fleet sends a request to ``engine``, decided on the view read at ``view_time``."""

    t: float
    rid: str
    engine: str
    view_time: float | None = None
    mode: RouteMode = RouteMode.P2C
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.ROUTE
    code: ClassVar[int] = ROUTE


@record(frozen=True, unsafe_hash=True)
class Demote:
    """The redline holds a queued request back, on ``resource``'s sample taken at ``sample_time``."""

    t: float
    rid: str
    resource: str
    sample_time: float
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.DEMOTE
    code: ClassVar[int] = DEMOTE


@record(frozen=True, unsafe_hash=True)
class Restore:
    """The redline cleared: a held request is queued again (on the sample taken at ``sample_time``)."""

    t: float
    rid: str
    resource: str
    sample_time: float
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.RESTORE
    code: ClassVar[int] = RESTORE


@record(frozen=True, unsafe_hash=True)
class Evict:
    """A running request is taken off its engine; ``state`` is its accumulated tokens S(t).

    An eviction channel also records what it decided on, so EV can judge its credited-headroom
    rule from the trace: ``resource`` (whose fresh sample lands the eviction's relief),
    ``headroom`` (that resource's measured headroom fraction the channel acted on), ``target``
    (the headroom fraction it restores) and ``capacity`` (the resource's size in state tokens:
    an eviction's relief is state / capacity). ``None``: not recorded (a move off a dead engine).
    """

    t: float
    rid: str
    state: int
    reason: str = ""
    resource: str | None = None
    headroom: float | None = None
    target: float | None = None
    capacity: int | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.EVICT
    code: ClassVar[int] = EVICT


@record(frozen=True, unsafe_hash=True)
class Relocate:
    """An evicted request is queued again on ``engine`` (it resumes from its prompt and output so far)."""

    t: float
    rid: str
    engine: str
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.RELOCATE
    code: ClassVar[int] = RELOCATE


#: the record fields each kind writes after t, kind and rid, by kind code (``None`` values left out)
RECORD_FIELDS: Mapping[int, tuple[str, ...]] = MappingProxyType(
    {
        SAMPLE: ("resource", "value", "sample_time"),
        ROUTE: ("engine", "view_time", "mode"),
        DEMOTE: ("resource", "sample_time"),
        RESTORE: ("resource", "sample_time"),
        EVICT: ("state", "reason", "resource", "headroom", "target", "capacity"),
        RELOCATE: ("engine",),
        ALERT: ("condition", "value", "bound", "since", "floor_scale"),  # `rvguard.watch_events`
        STALL: ("lag", "since"),
    }
)
