"""Event records (DESIGN §2): one slotted record per kind, frozen to the type checker.

A trace is a sequence of events in non-decreasing time. Every event has
``t`` (float seconds), ``rid`` and its ``kind``; the other fields depend on
the kind. A node event (`Sample`, DESIGN §10) concerns the engine, not a
request: its record has no rid, and its ``rid`` attribute is the empty
string, which no request can have. The kinds, their codes and which sequences of them are legal are
defined once, in `rvguard.lifecycle`; this module gives each kind its
record. Unknown fields read from a file are kept in ``extra`` (never an
error, never lost). `event_from_dict` / `event_to_dict` are the one mapping
between records and objects; the readers in `rvguard.io` build on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, fields
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar, TypeAlias

from ._record import record
from .bounds import MAX_DOUBLE, MAX_ID_CHARS, MAX_RID_INT, MAX_TIME, MAX_TOKENS, shown
from .errors import LifecycleError, TraceFormatError
from .lifecycle import (
    ADMIT,
    ARRIVE,
    CODE,
    COMPLETE,
    DISPATCH,
    DROP,
    FAIL,
    KINDS,
    NODE_CODES,
    REJECT,
)
from .lifecycle import TERMINAL_KINDS as TERMINAL_KINDS
from .lifecycle import EventKind as EventKind
from .proposal import Proposal as Proposal
from .runbook_events import RECORD_FIELDS, Demote, Evict, Relocate, Restore, Route, RouteMode, Sample, Stall
from .watch_events import Watch, watch_from_dict

__all__ = [
    "CLIENT_ERROR",
    "EVENT_CLASSES",
    "HOLD_BOUND",
    "PREEMPTED",
    "TERMINAL_KINDS",
    "Admit",
    "Arrive",
    "Basis",
    "Complete",
    "Demote",
    "Dispatch",
    "Drop",
    "Event",
    "EventKind",
    "Evict",
    "Fail",
    "Proposal",
    "Reject",
    "Relocate",
    "Restore",
    "Route",
    "RouteMode",
    "Sample",
    "Stall",
    "Watch",
    "event_from_dict",
    "event_to_dict",
    "is_client_error",
    "proposal_record",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


class Basis(StrEnum):
    """Why a request was admitted."""

    FLOOR = "floor"
    SURPLUS = "surplus"
    DEMOTED = "demoted"


@record(frozen=True, unsafe_hash=True)
class Arrive:
    """A request arrives; ``tenant`` is bound from authenticated identity.

    ``deadline`` is absolute (seconds); ``None`` means t + the tenant's deadline.
    """

    t: float
    rid: str
    tenant: str
    deadline: float | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    proposal: Proposal | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.ARRIVE
    code: ClassVar[int] = ARRIVE

    def __init__(
        self,
        t: float,
        rid: str,
        tenant: str,
        deadline: float | None = None,
        prompt_tokens: int | None = None,
        max_tokens: int | None = None,
        proposal: Proposal | None = None,
        extra: Mapping[str, Any] = _EMPTY,
    ) -> None:
        self.t = t  # type: ignore[misc]
        self.rid = rid  # type: ignore[misc]
        self.tenant = tenant  # type: ignore[misc]
        self.deadline = deadline  # type: ignore[misc]
        self.prompt_tokens = prompt_tokens  # type: ignore[misc]
        self.max_tokens = max_tokens  # type: ignore[misc]
        self.proposal = proposal  # type: ignore[misc]
        self.extra = extra  # type: ignore[misc]


@record(frozen=True, unsafe_hash=True)
class Admit:
    """The guard admits a request, on a ``basis``."""

    t: float
    rid: str
    basis: Basis = Basis.SURPLUS
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.ADMIT
    code: ClassVar[int] = ADMIT

    def __init__(
        self, t: float, rid: str, basis: Basis = Basis.SURPLUS, extra: Mapping[str, Any] = _EMPTY
    ) -> None:
        self.t = t  # type: ignore[misc]
        self.rid = rid  # type: ignore[misc]
        self.basis = basis  # type: ignore[misc]
        self.extra = extra  # type: ignore[misc]


@record(frozen=True, unsafe_hash=True)
class Reject:
    """The guard rejects a request at admission (terminal)."""

    t: float
    rid: str
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.REJECT
    code: ClassVar[int] = REJECT

    def __init__(self, t: float, rid: str, reason: str = "", extra: Mapping[str, Any] = _EMPTY) -> None:
        self.t = t  # type: ignore[misc]
        self.rid = rid  # type: ignore[misc]
        self.reason = reason  # type: ignore[misc]
        self.extra = extra  # type: ignore[misc]


@record(frozen=True, unsafe_hash=True)
class Dispatch:
    """A request takes one of the C backend slots."""

    t: float
    rid: str
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.DISPATCH
    code: ClassVar[int] = DISPATCH

    def __init__(self, t: float, rid: str, extra: Mapping[str, Any] = _EMPTY) -> None:
        self.t = t  # type: ignore[misc]
        self.rid = rid  # type: ignore[misc]
        self.extra = extra  # type: ignore[misc]


@record(frozen=True, unsafe_hash=True)
class Complete:
    """The backend finished the request (terminal)."""

    t: float
    rid: str
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.COMPLETE
    code: ClassVar[int] = COMPLETE

    def __init__(self, t: float, rid: str, extra: Mapping[str, Any] = _EMPTY) -> None:
        self.t = t  # type: ignore[misc]
        self.rid = rid  # type: ignore[misc]
        self.extra = extra  # type: ignore[misc]


@record(frozen=True, unsafe_hash=True)
class Drop:
    """The guard drops an admitted request as doomed (terminal)."""

    t: float
    rid: str
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.DROP
    code: ClassVar[int] = DROP

    def __init__(self, t: float, rid: str, reason: str = "", extra: Mapping[str, Any] = _EMPTY) -> None:
        self.t = t  # type: ignore[misc]
        self.rid = rid  # type: ignore[misc]
        self.reason = reason  # type: ignore[misc]
        self.extra = extra  # type: ignore[misc]


@record(frozen=True, unsafe_hash=True)
class Fail:
    """The backend (or the client) failed the request (terminal)."""

    t: float
    rid: str
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.FAIL
    code: ClassVar[int] = FAIL

    def __init__(self, t: float, rid: str, reason: str = "", extra: Mapping[str, Any] = _EMPTY) -> None:
        self.t = t  # type: ignore[misc]
        self.rid = rid  # type: ignore[misc]
        self.reason = reason  # type: ignore[misc]
        self.extra = extra  # type: ignore[misc]


Event: TypeAlias = (
    Arrive
    | Admit
    | Reject
    | Dispatch
    | Complete
    | Drop
    | Fail  # DESIGN §2
    | Sample
    | Route
    | Demote
    | Restore
    | Evict
    | Relocate  # DESIGN §10
    | Watch  # DESIGN §12
    | Stall  # the loop watchdog
)

#: the ``fail`` reason (alone or as ``client-error: <detail>``) of a request the backend refused as
#: the client's own mistake (an HTTP 4xx such as a malformed field or an unknown model): the
#: service was not at fault, so SF does not count it against the guard; AF and WF judge it as any fail
CLIENT_ERROR = "client-error"


def is_client_error(reason: str) -> bool:
    """True when a ``fail`` reason says the client, not the service, failed the request."""
    return reason == CLIENT_ERROR or reason.startswith(CLIENT_ERROR + ":")


#: the ``fail`` reason of a request stopped to shed load (bare preemption, or an eviction that
#: is not relocated): PR says no floor-entitled or assured request ever ends so
PREEMPTED = "preempted"
#: the ``fail`` reason of a surplus request the redline held longer than its relief's hold bound
#: (`rvguard.enforce.rationing`): answered with a retry signal, never left to its client's time-out
HOLD_BOUND = "hold-bound"


_DESIGN2: tuple[type[Event], ...] = (Arrive, Admit, Reject, Dispatch, Complete, Drop, Fail)
_DESIGN10: tuple[type[Event], ...] = (Sample, Route, Demote, Restore, Evict, Relocate, Watch, Stall)
#: the record class of each kind (the core and the columnar form build events through it)
EVENT_CLASSES: Mapping[EventKind, type[Event]] = MappingProxyType(
    {cls.kind: cls for cls in _DESIGN2 + _DESIGN10}
)
_CLASSES: dict[str, type[Event]] = {k.value: cls for k, cls in EVENT_CLASSES.items()}


def _check_classes() -> None:
    """Import-time: one record class per lifecycle kind, each carrying its kind's code."""
    missing = [k.value for k in KINDS if k not in EVENT_CLASSES]
    wrong = [c.__name__ for c in EVENT_CLASSES.values() if c.code != CODE[c.kind]]
    if missing or wrong:
        raise LifecycleError(f"events: no record for kinds {missing}; wrong code on {wrong}")


_check_classes()
#: the fields a record of each kind reads from a mapping (its record's fields, ``kind`` but not
#: ``extra``); any other key is an unknown field, kept in ``extra``
_KNOWN: dict[str, frozenset[str]] = {
    kind: frozenset({"kind", *(f.name for f in fields(cls))} - {"extra"}) for kind, cls in _CLASSES.items()
}


def _time(value: Any, name: str) -> float:
    """A time field: finite, 0 ≤ v ≤ MAX_TIME (`rvguard.bounds`), compared before any float cast."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TraceFormatError(f"must be a number, got {shown(value)}", field=name)
    if not 0 <= value <= MAX_TIME:  # int compares exactly: a 400-digit int never meets float()
        what = "must not be negative" if value < 0 else f"must be finite and at most {MAX_TIME:g} s"
        raise TraceFormatError(f"{what}, got {shown(value)}", field=name)
    return float(value)


def _opt_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_TOKENS  # also refuses NaN
        or value != int(value)
    ):
        raise TraceFormatError(f"must be a whole number in [0, {MAX_TOKENS}], got {shown(value)}", field=name)
    return int(value)


#: text fields that are ids (keys a checker holds for the whole trace): at most MAX_ID_CHARS long
_IDS = frozenset({"rid", "tenant", "engine", "resource"})


def _text(value: Any, name: str, *, required: bool) -> str:
    if value is None and not required:
        return ""
    if isinstance(value, str) and (value or not required):
        if len(value) > MAX_ID_CHARS and name in _IDS:
            raise TraceFormatError(f"longer than {MAX_ID_CHARS} characters ({len(value):,})", field=name)
        if not value.isascii():
            _unicode(value, name)
        return value
    if isinstance(value, int) and not isinstance(value, bool) and name == "rid":
        if abs(value) > MAX_RID_INT:
            raise TraceFormatError(f"an integer rid must fit in 64 bits, got {shown(value)}", field=name)
        return str(value)
    raise TraceFormatError(f"must be a non-empty string, got {shown(value)}", field=name)


def _unicode(value: str, name: str) -> None:
    """Refuse text that UTF-8 cannot carry (a lone surrogate such as ``"\\ud800"`` in JSON)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = f"U+{ord(value[exc.start]):04X}"
        raise TraceFormatError(f"not valid Unicode text (a lone surrogate {bad})", field=name) from None


def _proposal(value: Any) -> Proposal | None:
    if value is None:
        return None
    if isinstance(value, Proposal):
        return value
    if not isinstance(value, Mapping):
        raise TraceFormatError(f"must be an object, got {shown(value)}", field="proposal")
    unknown = set(value) - {"admit", "objective", "priority_hint"}
    if unknown:
        raise TraceFormatError(f"unknown keys {shown(sorted(map(str, unknown)))}", field="proposal")
    admit = value.get("admit", True)
    if not isinstance(admit, bool):
        raise TraceFormatError(f"must be true or false, got {shown(admit)}", field="proposal.admit")
    objective = value.get("objective")
    if objective is not None:
        objective = _text(objective, "proposal.objective", required=False)
    hint = value.get("priority_hint")
    if hint is not None and (
        isinstance(hint, bool) or not isinstance(hint, int | float) or not -MAX_DOUBLE <= hint <= MAX_DOUBLE
    ):
        raise TraceFormatError(f"must be a finite number, got {shown(hint)}", field="proposal.priority_hint")
    return Proposal(admit=admit, objective=objective, priority_hint=None if hint is None else float(hint))


def _deadline(value: Any, t: float) -> float | None:
    """An absolute deadline: a time, and never before the arrival it belongs to."""
    if value is None:
        return None
    deadline = _time(value, "deadline")
    if deadline < t:
        raise TraceFormatError(f"is before the arrival time t = {t!r}, got {deadline!r}", field="deadline")
    return deadline


def _arrive(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Arrive:
    return Arrive(
        t=t,
        rid=rid,
        tenant=_text(rec.get("tenant"), "tenant", required=True),
        deadline=_deadline(rec.get("deadline"), t),
        prompt_tokens=_opt_int(rec.get("prompt_tokens"), "prompt_tokens"),
        max_tokens=_opt_int(rec.get("max_tokens"), "max_tokens"),
        proposal=_proposal(rec.get("proposal")),
        extra=extra,
    )


def _admit(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Admit:
    basis = rec.get("basis", "surplus")
    try:
        return Admit(t=t, rid=rid, basis=Basis(basis), extra=extra)
    except ValueError:
        raise TraceFormatError(
            f"must be one of floor, surplus, demoted, got {shown(basis)}", field="basis"
        ) from None


def _fraction(value: Any, name: str) -> float:
    """A headroom fraction: a finite number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise TraceFormatError(f"must be a number in [0, 1], got {shown(value)}", field=name)
    return float(value)


def _count(value: Any, name: str) -> int:
    """A required whole number of tokens."""
    if value is None:
        raise TraceFormatError("is missing", field=name)
    count = _opt_int(value, name)
    assert count is not None
    return count


def _required_time(rec: Mapping[str, Any], name: str) -> float:
    if rec.get(name) is None:
        raise TraceFormatError("is missing", field=name)
    return _time(rec[name], name)


def _sample(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Event:
    return Sample(
        t=t,
        resource=_text(rec.get("resource"), "resource", required=True),
        value=_fraction(rec.get("value"), "value"),
        sample_time=_required_time(rec, "sample_time"),
        extra=extra,
    )


def _stall(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Event:
    lag = rec.get("lag")
    if isinstance(lag, bool) or not isinstance(lag, int | float) or not 0.0 <= lag <= MAX_TIME:
        raise TraceFormatError(f"must be a number of seconds ≥ 0, got {shown(lag)}", field="lag")
    return Stall(t=t, lag=float(lag), since=_required_time(rec, "since"), extra=extra)


def _route(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Event:
    mode = rec.get("mode")
    mode = "p2c" if mode is None else mode
    if mode not in ("p2c", "siloed"):
        raise TraceFormatError(f"must be one of p2c, siloed, got {shown(mode)}", field="mode")
    view = rec.get("view_time")
    return Route(
        t=t,
        rid=rid,
        engine=_text(rec.get("engine"), "engine", required=True),
        view_time=None if view is None else _time(view, "view_time"),
        mode=RouteMode(mode),
        extra=extra,
    )


def _redline(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Event:
    cls = Demote if rec["kind"] == "demote" else Restore
    return cls(
        t=t,
        rid=rid,
        resource=_text(rec.get("resource"), "resource", required=True),
        sample_time=_required_time(rec, "sample_time"),
        extra=extra,
    )


def _evict(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Event:
    reason = _text(rec.get("reason"), "reason", required=False)
    resource, headroom, target, capacity = (
        rec.get(k) for k in ("resource", "headroom", "target", "capacity")
    )
    target = None if target is None else _fraction(target, "target")
    if target == 0:
        raise TraceFormatError("must be a number in (0, 1], got 0", field="target")
    if capacity is not None and (capacity := _count(capacity, "capacity")) < 1:
        raise TraceFormatError(f"must be a whole number ≥ 1, got {shown(capacity)}", field="capacity")
    return Evict(
        t=t,
        rid=rid,
        state=_count(rec.get("state"), "state"),
        reason=reason,
        resource=None if resource is None else _text(resource, "resource", required=True),
        headroom=None if headroom is None else _fraction(headroom, "headroom"),
        target=target,
        capacity=capacity,
        extra=extra,
    )


def _relocate(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Event:
    return Relocate(t=t, rid=rid, engine=_text(rec.get("engine"), "engine", required=True), extra=extra)


def _alert(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Event:
    return watch_from_dict(rec, t, extra)


#: the record builders of the DESIGN §10 and §12 kinds
_NODE_BUILDERS = {
    "sample": _sample,
    "route": _route,
    "demote": _redline,
    "restore": _redline,
    "evict": _evict,
    "relocate": _relocate,
    "alert": _alert,
    "stall": _stall,
}


def _rid(rec: Mapping[str, Any], kind: str) -> str:
    """The record's rid; a node event (``sample``, ``alert``, ``stall``) has none (``rid`` empty)."""
    if kind not in ("sample", "alert", "stall"):
        return _text(rec.get("rid"), "rid", required=True)
    if "rid" in rec:
        raise TraceFormatError(f"a {kind} is about the node, not a request: it has no rid", field="rid")
    return ""


def event_from_dict(rec: Mapping[str, Any]) -> Event:
    """Validate one trace record and build its event.

    Raises:
        TraceFormatError: a missing, mistyped or out-of-range field (``.field`` names it).
    """
    kind = rec.get("kind")
    if not isinstance(kind, str) or kind not in _CLASSES:
        if kind is None:
            raise TraceFormatError("is missing", field="kind")
        raise TraceFormatError(f"unknown event kind {shown(kind)}", field="kind")
    if "t" not in rec:
        raise TraceFormatError("is missing", field="t")
    t = _time(rec["t"], "t")
    rid = _rid(rec, kind)
    known = _KNOWN[kind]
    extra: Mapping[str, Any] = _EMPTY
    if len(rec) > len(known) or any(k not in known for k in rec):
        extra = MappingProxyType({k: v for k, v in rec.items() if k not in known})
    if kind == "arrive":
        return _arrive(rec, t, rid, extra)
    if kind == "admit":
        return _admit(rec, t, rid, extra)
    if kind in ("reject", "drop", "fail"):
        cls = _CLASSES[kind]
        return cls(t=t, rid=rid, reason=_text(rec.get("reason"), "reason", required=False), extra=extra)  # type: ignore[call-arg]
    build = _NODE_BUILDERS.get(kind)
    if build is not None:
        return build(rec, t, rid, extra)
    return _CLASSES[kind](t=t, rid=rid, extra=extra)  # type: ignore[call-arg]


def _arrive_fields(ev: Arrive, rec: dict[str, Any]) -> None:
    rec["tenant"] = ev.tenant
    for name in ("deadline", "prompt_tokens", "max_tokens"):
        value = getattr(ev, name)
        if value is not None:
            rec[name] = value
    if ev.proposal is not None:
        rec["proposal"] = proposal_record(ev.proposal)


def proposal_record(p: Proposal) -> dict[str, Any]:
    """A proposal as its trace record (``None`` fields left out)."""
    prop: dict[str, Any] = {"admit": p.admit}
    if p.objective is not None:
        prop["objective"] = p.objective
    if p.priority_hint is not None:
        prop["priority_hint"] = p.priority_hint
    return prop


def event_to_dict(ev: Event) -> dict[str, Any]:
    """The record of an event, in DESIGN §8 field names; ``None`` fields are left out."""
    rec: dict[str, Any] = {"t": ev.t, "kind": ev.kind.value, "rid": ev.rid}
    if isinstance(ev, Arrive):
        _arrive_fields(ev, rec)
    elif isinstance(ev, Admit):
        rec["basis"] = ev.basis.value
    elif isinstance(ev, Reject | Drop | Fail):
        rec["reason"] = ev.reason
    elif ev.code in RECORD_FIELDS:
        _node_fields(ev, rec)
    for k, v in ev.extra.items():
        rec.setdefault(k, v)
    return rec


def _node_fields(ev: Event, rec: dict[str, Any]) -> None:
    if ev.code in NODE_CODES:
        del rec["rid"]
    for name in RECORD_FIELDS[ev.code]:
        value = getattr(ev, name)
        if value is not None:
            rec[name] = value.value if isinstance(value, RouteMode) else value
