"""ER — eviction relief: an emergency eviction's planned relief lands by the node's deadline (DESIGN §11).

Theory of operation
-------------------
The emergency channel plans its evictions so that the k-bounded,
serialized relief of every eviction it needs lands before the node runs
out: the planner's ``lands_at`` (each eviction taking ``overhead + S /
link_rate`` on one of k channels, each waiting for its link-bucket charge)
against the node's ``deadline`` (when the redline's trend reaches zero
headroom). The Guard records both on each emergency ``evict`` it writes
(unknown fields ``lands_at`` and ``deadline``, `rvguard.enforce.emergency`).
An emergency ``evict`` whose ``lands_at`` is after its ``deadline`` is a bad
prefix at that event.

ER is *monitored, not enforced*: the Guard cannot make the relief faster
than its overhead and link allow, and evicting late is still the best it can
do; a violation says the node's pressure outran what eviction can relieve
(tune k, the link or the hard floor), not that the guard broke a rule — the
rules it keeps by construction are EV's. What ER does not judge: an eviction
that records neither field (a voluntary one, a move off a dead engine, or a
plan with no finite deadline — a node not falling — or a target no
candidate can reach, which the Guard logs and counts as a warning instead).
The bad location is not final: each later late eviction is reported too.

Cost: O(1) per event; memory O(1) per live request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..events import Event, EventKind, Evict
from ..runbook_events import EMERGENCY
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["ER", "TRANSITIONS", "Loc", "relief"]


class Loc(Enum):
    """ER locations of one request."""

    NEW = "new"
    LIVE = "live"
    LATE = "late"  # bad: an emergency eviction planned to land after the node's deadline


K = EventKind


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def relief(ev: Evict) -> tuple[float, float] | None:
    """An emergency eviction's recorded (lands_at, deadline), ``None`` when it records no pair."""
    lands, deadline = _number(ev.extra.get("lands_at")), _number(ev.extra.get("deadline"))
    if ev.reason != EMERGENCY or lands is None or deadline is None:
        return None
    return lands, deadline


def _in_time(inst: Instance, ev: Event) -> bool:
    assert isinstance(ev, Evict)
    pair = relief(ev)
    return pair is None or pair[0] <= pair[1]


def _note(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Evict)
    inst.vars["er_relief"] = relief(ev)


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    lands, deadline = inst.vars["er_relief"]
    return (
        f"the k-bounded serialized relief lands at {lands:g}, after the node's deadline {deadline:g} "
        "(monitored, not enforced: eviction cannot relieve the node in time)"
    )


_EVICT = (
    Edge(Loc.LIVE, _in_time, "relief by the deadline, or none recorded"),
    Edge(Loc.LATE, label="relief after the deadline", update=_note, detail=_detail),
)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (Edge(Loc.LIVE),),
    (Loc.LIVE, K.EVICT): _EVICT,
    (Loc.LATE, K.EVICT): _EVICT,
}


def _context(inst: Instance) -> Mapping[str, Any]:
    lands, deadline = inst.vars["er_relief"]
    return {"lands_at": lands, "deadline": deadline}


ER = TimedAutomaton(
    name="ER",
    description="an emergency eviction's k-bounded serialized relief lands by the node's deadline "
    "(monitored, not enforced)",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.LATE}),
    transitions=TRANSITIONS,
    context=_context,
    bad_is_final=False,
)
