"""Event records (DESIGN §2): one frozen, slotted dataclass per kind.

A trace is a sequence of events in non-decreasing time. Every event has
``t`` (float seconds), ``rid`` and its ``kind``; the other fields depend on
the kind. Unknown fields read from a file are kept in ``extra`` (never an
error, never lost). `event_from_dict` / `event_to_dict` are the one mapping
between records and objects; the readers in `rvguard.io` build on them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar, TypeAlias

from .errors import TraceFormatError

__all__ = [
    "TERMINAL_KINDS",
    "Admit",
    "Arrive",
    "Basis",
    "Complete",
    "Dispatch",
    "Drop",
    "Event",
    "EventKind",
    "Fail",
    "Proposal",
    "Reject",
    "event_from_dict",
    "event_to_dict",
    "proposal_record",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


class EventKind(StrEnum):
    """The seven event kinds of DESIGN §2.

    Each event class also carries ``code``, the kind's position in this enum,
    so hot paths index tables by a small int instead of hashing an Enum.
    """

    ARRIVE = "arrive"
    ADMIT = "admit"
    REJECT = "reject"
    DISPATCH = "dispatch"
    COMPLETE = "complete"
    DROP = "drop"
    FAIL = "fail"


class Basis(StrEnum):
    """Why a request was admitted."""

    FLOOR = "floor"
    SURPLUS = "surplus"
    DEMOTED = "demoted"


TERMINAL_KINDS = frozenset({EventKind.REJECT, EventKind.COMPLETE, EventKind.DROP, EventKind.FAIL})


@dataclass(frozen=True, slots=True)
class Proposal:
    """What an untrusted learner proposes for a request: it is only a proposal."""

    admit: bool = True
    objective: str | None = None
    priority_hint: float | None = None


@dataclass(frozen=True, slots=True)
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
    code: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class Admit:
    """The guard admits a request, on a ``basis``."""

    t: float
    rid: str
    basis: Basis = Basis.SURPLUS
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.ADMIT
    code: ClassVar[int] = 1


@dataclass(frozen=True, slots=True)
class Reject:
    """The guard rejects a request at admission (terminal)."""

    t: float
    rid: str
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.REJECT
    code: ClassVar[int] = 2


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A request takes one of the C backend slots."""

    t: float
    rid: str
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.DISPATCH
    code: ClassVar[int] = 3


@dataclass(frozen=True, slots=True)
class Complete:
    """The backend finished the request (terminal)."""

    t: float
    rid: str
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.COMPLETE
    code: ClassVar[int] = 4


@dataclass(frozen=True, slots=True)
class Drop:
    """The guard drops an admitted request as doomed (terminal)."""

    t: float
    rid: str
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.DROP
    code: ClassVar[int] = 5


@dataclass(frozen=True, slots=True)
class Fail:
    """The backend (or the client) failed the request (terminal)."""

    t: float
    rid: str
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    kind: ClassVar[EventKind] = EventKind.FAIL
    code: ClassVar[int] = 6


Event: TypeAlias = Arrive | Admit | Reject | Dispatch | Complete | Drop | Fail

_CLASSES: dict[str, type[Event]] = {
    "arrive": Arrive,
    "admit": Admit,
    "reject": Reject,
    "dispatch": Dispatch,
    "complete": Complete,
    "drop": Drop,
    "fail": Fail,
}
_KNOWN: dict[str, frozenset[str]] = {
    "arrive": frozenset(
        {"t", "kind", "rid", "tenant", "deadline", "prompt_tokens", "max_tokens", "proposal"}
    ),
    "admit": frozenset({"t", "kind", "rid", "basis"}),
    "reject": frozenset({"t", "kind", "rid", "reason"}),
    "dispatch": frozenset({"t", "kind", "rid"}),
    "complete": frozenset({"t", "kind", "rid"}),
    "drop": frozenset({"t", "kind", "rid", "reason"}),
    "fail": frozenset({"t", "kind", "rid", "reason"}),
}


def _time(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TraceFormatError(f"must be a number, got {value!r}", field=name)
    v = float(value)
    if not math.isfinite(v):
        raise TraceFormatError(f"must be finite, got {value!r}", field=name)
    if v < 0:
        raise TraceFormatError(f"must not be negative, got {value!r}", field=name)
    return v


def _opt_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
        or value < 0
    ):
        raise TraceFormatError(f"must be a non-negative whole number, got {value!r}", field=name)
    return int(value)


def _text(value: Any, name: str, *, required: bool) -> str:
    if value is None and not required:
        return ""
    if isinstance(value, str) and (value or not required):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and name == "rid":
        return str(value)
    raise TraceFormatError(f"must be a non-empty string, got {value!r}", field=name)


def _proposal(value: Any) -> Proposal | None:
    if value is None:
        return None
    if isinstance(value, Proposal):
        return value
    if not isinstance(value, Mapping):
        raise TraceFormatError(f"must be an object, got {value!r}", field="proposal")
    unknown = set(value) - {"admit", "objective", "priority_hint"}
    if unknown:
        raise TraceFormatError(f"unknown keys {sorted(unknown)}", field="proposal")
    admit = value.get("admit", True)
    if not isinstance(admit, bool):
        raise TraceFormatError(f"must be true or false, got {admit!r}", field="proposal.admit")
    objective = value.get("objective")
    if objective is not None and not isinstance(objective, str):
        raise TraceFormatError(f"must be a string, got {objective!r}", field="proposal.objective")
    hint = value.get("priority_hint")
    if hint is not None and (
        isinstance(hint, bool) or not isinstance(hint, int | float) or not math.isfinite(hint)
    ):
        raise TraceFormatError(f"must be a number, got {hint!r}", field="proposal.priority_hint")
    return Proposal(admit=admit, objective=objective, priority_hint=None if hint is None else float(hint))


def _arrive(rec: Mapping[str, Any], t: float, rid: str, extra: Mapping[str, Any]) -> Arrive:
    deadline = rec.get("deadline")
    return Arrive(
        t=t,
        rid=rid,
        tenant=_text(rec.get("tenant"), "tenant", required=True),
        deadline=None if deadline is None else _time(deadline, "deadline"),
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
            f"must be one of floor, surplus, demoted, got {basis!r}", field="basis"
        ) from None


def event_from_dict(rec: Mapping[str, Any]) -> Event:
    """Validate one trace record and build its event.

    Raises:
        TraceFormatError: a missing, mistyped or out-of-range field (``.field`` names it).
    """
    kind = rec.get("kind")
    if kind not in _CLASSES:
        if kind is None:
            raise TraceFormatError("is missing", field="kind")
        raise TraceFormatError(f"unknown event kind {kind!r}", field="kind")
    if "t" not in rec:
        raise TraceFormatError("is missing", field="t")
    t = _time(rec["t"], "t")
    rid = _text(rec.get("rid"), "rid", required=True)
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
    for k, v in ev.extra.items():
        rec.setdefault(k, v)
    return rec
