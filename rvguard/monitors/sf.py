"""SF — service floor: every admitted floor-entitled request completes by its deadline.

Theory of operation
-------------------
Clock ``x`` starts at the arrival. An entitled request that is admitted
waits in WAITING under the timer ``x > D(R) - t_arrive``: once observed
time passes the absolute deadline D(R) with no completion, the instance goes
bad *at the instant D(R)*, however late the next event comes. A completion
at exactly D(R) is on time (the timer needs time to pass D strictly). A
``drop`` or ``fail`` of a waiting request is a violation at that event,
except a ``fail`` whose reason says the client's request was at fault
(``client-error``, `rvguard.events.is_client_error`: the backend refused it
with a 4xx such as an unknown model): the service did not fail, so the request
leaves SF exempt. Requests that are not entitled, or were never admitted, are exempt (the
latter is AF's business). SF holds only under the contract's preconditions
(A4 stability and the deadline bound, see `rvguard verify`): it is
monitored, not enforced by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..events import Event, EventKind, Fail, is_client_error
from .automaton import Edge, Instance, TimedAutomaton, Timer, entitled

__all__ = ["SF", "TRANSITIONS", "Loc"]


class Loc(Enum):
    """SF locations of one request."""

    NEW = "new"
    PENDING = "pending"
    WAITING = "waiting"
    MET = "met"
    EXEMPT = "exempt"
    BAD = "bad"


K = EventKind


def _on_time(inst: Instance, ev: Event) -> bool:
    return ev.t <= inst.deadline


def _late(inst: Instance, ev: Event | None, now: float) -> str:
    return f"entitled request not completed by its deadline {inst.deadline:.6g} s"


def _ended(inst: Instance, ev: Event | None, now: float) -> str:
    kind = "ended" if ev is None else ev.kind.value
    return f"entitled admitted request {kind} at {now:.6g} s instead of completing by {inst.deadline:.6g} s"


def _client_error(inst: Instance, ev: Event) -> bool:
    return isinstance(ev, Fail) and is_client_error(ev.reason)


def _deadline(inst: Instance) -> float:
    return inst.deadline


TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ARRIVE): (
        Edge(Loc.PENDING, entitled, "entitled"),
        Edge(Loc.EXEMPT, label="not entitled"),
    ),
    (Loc.PENDING, K.ADMIT): (Edge(Loc.WAITING),),
    (Loc.PENDING, K.REJECT): (Edge(Loc.EXEMPT),),
    (Loc.WAITING, K.COMPLETE): (
        Edge(Loc.MET, _on_time, "t ≤ D(R)"),
        Edge(Loc.BAD, label="t > D(R)", detail=_late),
    ),
    (Loc.WAITING, K.DROP): (Edge(Loc.BAD, detail=_ended),),
    (Loc.WAITING, K.FAIL): (
        Edge(Loc.EXEMPT, _client_error, "client error"),
        Edge(Loc.BAD, detail=_ended),
    ),
}

TIMERS = (Timer(Loc.WAITING, _deadline, Loc.BAD, "x > D(R) - t_arrive", _late),)


def _context(inst: Instance) -> Mapping[str, Any]:
    return {"tenant": inst.tenant, "deadline": inst.deadline, "window": inst.window}


SF = TimedAutomaton(
    name="SF",
    description="every admitted floor-entitled request completes by its deadline",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.BAD}),
    transitions=TRANSITIONS,
    timers=TIMERS,
    context=_context,
)
