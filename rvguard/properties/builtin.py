"""The built-in properties as tables: the definitions the hand-written fast paths are checked against.

Each table restates one property of DESIGN §3 / §10 / §11 in the table form
(`rvguard.properties.table`), written from the design's text, not from the
hand-written monitors (tests/properties holds the two to equal verdicts):

* WF — the lifecycle (`rvguard.lifecycle.MOVES`): every legal move an edge,
  every other (stage, kind) pair an edge into bad; a protocol table (its bad
  edges refuse the event).
* AF — both sides: a floor-entitled arrival (its tenant's credit in the
  arrival's window, itself included, within B) is never rejected nor admitted
  as ``demoted`` (remedy: admit it on the floor), except where the decision
  records a declared refusal of the floor (``floor_refused``: a shared pool's
  refusal, a declared lowering); and the floor credit of floor-basis
  admissions of a tenant's arrivals in one window stays within B (remedy:
  admit as surplus).
* DR — a drop only when doomed, t + L(R) > D(R) (remedy: do not drop).
* RB — surplus (basis not floor) in flight ≤ C − R (remedy: delay the dispatch).
* CAP — requests in flight ≤ C (remedy: delay the dispatch).
* PR — a protected request (entitled, or admitted on the floor) is never
  evicted nor failed ``preempted`` by the guard (remedy: do not).
* SF — the event edges of the service floor (a completion after the
  deadline, a drop or a failure of an admitted entitled request);
  its deadline timer stays with the hand-written monitor. Declared
  monitor-only: a late completion is the backend's, not the guard's, event.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..lifecycle import KINDS, MOVES, NODE_KINDS, STAGES
from .table import Counter, Edge, PropertyTable, Scope, edge

__all__ = ["AF", "BUILTIN", "CAP", "DR", "PR", "RB", "SF", "WF"]

_ENDS = ("complete", "fail", "drop")


def _wf() -> PropertyTable:
    edges: list[Edge] = []
    for s in STAGES:
        for k in KINDS:
            if k in NODE_KINDS:
                continue
            nxt = MOVES.get((s, k))
            target = "BAD" if nxt is None else nxt.name
            edges.append(edge(s.name, k, target, remedy="suppress" if nxt is None else None))
    return PropertyTable(
        name="WF",
        description="the request lifecycle: arrive → admit → dispatch → one end (DESIGN §2, §10)",
        locations=(*(s.name for s in STAGES), "BAD"),
        initial=STAGES[0].name,
        bad="BAD",
        edges=tuple(edges),
        protocol=True,
    )


WF = _wf()

_ENTITLED = "floored == 1 and used + weight <= floor"
#: an admission within the floor: not on the floor, or its credit still within B
_WITHIN = "floor_credit == 0 or granted + floor_credit <= floor"
#: the floor's room for one more entitled admission (what ``replace: admit floor`` needs)
_ROOM = "granted + weight <= floor"
#: a refusal of the floor the guard did not decide alone: the decision records it (a shared pool's
#: refusal, a declared lowering while the watch fires): AF's declared exceptions
_DECLARED = "floor_refused == 1"
_UNDECLARED = f"not ({_DECLARED})"  # its negation as written: `skeleton` sees the pair


def _refused(kind: str, guard: str) -> tuple[Edge, ...]:
    """An entitled request refused the floor by ``kind`` (under ``guard``, a prefix ending in
    ``and``, or empty): declared, an exception;
    else bad, admitted on the floor instead where it has room (an entitled arrival's floor always
    has: the second bad edge never holds on a trace; it states the replace's precondition for Z3)."""
    # an admission's edges all count its floor credit (0 here: not on the floor), so the group's
    # increments agree and the offline checker keeps AF's counters as prefix sums (`skeleton`)
    ups = ["granted += floor_credit"] if kind == "admit" else []
    return (
        edge("ENTITLED", kind, "DECLARED", f"{guard}{_DECLARED}", ups),
        edge("ENTITLED", kind, "BAD", f"{guard}{_UNDECLARED} and {_ROOM}", ups, "replace: admit floor"),
        edge("ENTITLED", kind, "BAD", f"{guard}{_UNDECLARED} and not ({_ROOM})", ups, "suppress"),
    )


def _upper(src: str, guard: str) -> tuple[Edge, ...]:
    """AF's upper side at an admission from ``src`` (under ``guard``, as `_refused`'s): floor credit
    within B."""
    return (
        edge(src, "admit", "ADMITTED", f"{guard}({_WITHIN})", ["granted += floor_credit"]),
        edge(
            src,
            "admit",
            "BAD",
            f"{guard}not ({_WITHIN})",
            ["granted += floor_credit"],
            "replace: admit surplus",
        ),
    )


AF = PropertyTable(
    name="AF",
    description="every floor-entitled request is admitted, not as demoted; floor admissions stay within B "
    "per tenant-window; a refusal of the floor the decision records (pool, declared lowering) is excepted",
    locations=("NEW", "ENTITLED", "FREE", "ADMITTED", "DECLARED", "BAD"),
    initial="NEW",
    bad="BAD",
    counters=(Counter("used", Scope.TENANT_WINDOW), Counter("granted", Scope.TENANT_WINDOW)),
    edges=(
        edge("NEW", "arrive", "ENTITLED", _ENTITLED, ["used += weight"]),
        edge("NEW", "arrive", "FREE", f"not ({_ENTITLED})", ["used += weight"]),
        *_refused("reject", ""),
        # an admission as demoted refuses the floor as a reject does (under ``excess: demote``)
        *_refused("admit", "demoted_basis == 1 and "),
        edge("ENTITLED", "drop", "BAD", remedy="suppress"),
        *_upper("ENTITLED", "not (demoted_basis == 1) and "),
        *_upper("FREE", ""),
    ),
)

DR = PropertyTable(
    name="DR",
    description="a request is dropped only if doomed: t + L(R) > D(R)",
    locations=("NEW", "LIVE", "DONE", "BAD"),
    initial="NEW",
    bad="BAD",
    edges=(
        edge("NEW", "arrive", "LIVE"),
        edge("LIVE", "drop", "DONE", "t + lower > deadline"),
        edge("LIVE", "drop", "BAD", "t + lower <= deadline", remedy="suppress"),
    ),
)


def _in_flight(name: str, description: str, limit: str, counted: str) -> PropertyTable:
    """A table bounding a shared count of dispatched requests by ``limit``; ``counted``: whose."""
    return PropertyTable(
        name=name,
        description=description,
        locations=("NEW", "OTHER", "QUEUED", "RUNNING", "OVER", "DONE"),
        initial="NEW",
        bad="OVER",
        counters=(Counter("n", Scope.SHARED),),
        edges=(
            edge("NEW", "admit", "QUEUED", counted),
            edge("NEW", "admit", "OTHER", f"not ({counted})"),
            edge("QUEUED", "dispatch", "RUNNING", f"n + 1 <= {limit}", ["n += 1"]),
            edge("QUEUED", "dispatch", "OVER", f"not (n + 1 <= {limit})", ["n += 1"], "delay"),
            *(edge(src, k, "DONE", updates=["n -= 1"]) for src in ("RUNNING", "OVER") for k in _ENDS),
            *(edge(src, "evict", "QUEUED", updates=["n -= 1"]) for src in ("RUNNING", "OVER")),
        ),
    )


RB = _in_flight(
    "RB",
    "surplus work in flight never exceeds C − R (the reserved buffer)",
    "slots - reserve",
    "floor_basis == 0",
)
CAP = _in_flight("CAP", "requests in flight never exceed the C slots", "slots", "true")

_PROTECTED = ("PROTECTED", "PREEMPTED")
PR = PropertyTable(
    name="PR",
    description="no assured or floor-entitled request is ever ended by the guard (evicted, or failed "
    "'preempted', 'shutdown', ...)",
    locations=("NEW", "ENTITLED", "ARRIVED", "OPEN", "PROTECTED", "PREEMPTED", "DONE"),
    initial="NEW",
    bad="PREEMPTED",
    counters=(Counter("used", Scope.TENANT_WINDOW),),
    edges=(
        edge("NEW", "arrive", "ENTITLED", _ENTITLED, ["used += weight"]),
        edge("NEW", "arrive", "ARRIVED", f"not ({_ENTITLED})", ["used += weight"]),
        edge("ENTITLED", "admit", "PROTECTED"),
        edge("ARRIVED", "admit", "PROTECTED", "floor_basis == 1"),
        edge("ARRIVED", "admit", "OPEN", "floor_basis == 0"),
        *(edge(src, "evict", "PREEMPTED", remedy="suppress") for src in _PROTECTED),
        *(
            edge(src, "fail", "PREEMPTED", "preempted == 1", remedy="suppress", controllable=True)
            for src in _PROTECTED
        ),
        *(edge(src, "fail", "DONE", "preempted == 0") for src in _PROTECTED),
    ),
)

SF = PropertyTable(
    name="SF",
    description="an admitted floor-entitled request completes by its deadline (event edges only)",
    locations=("NEW", "ENTITLED", "FREE", "DONE", "BAD"),
    initial="NEW",
    bad="BAD",
    counters=(Counter("used", Scope.TENANT_WINDOW),),
    monitor_only=True,
    edges=(
        edge("NEW", "arrive", "ENTITLED", _ENTITLED, ["used += weight"]),
        edge("NEW", "arrive", "FREE", f"not ({_ENTITLED})", ["used += weight"]),
        edge("ENTITLED", "reject", "DONE"),
        edge("ENTITLED", "complete", "DONE", "t <= deadline"),
        edge("ENTITLED", "complete", "BAD", "t > deadline"),
        edge("ENTITLED", "drop", "BAD"),
        edge("ENTITLED", "fail", "BAD"),
    ),
)

#: the built-in tables by name
BUILTIN: Mapping[str, PropertyTable] = MappingProxyType({t.name: t for t in (WF, AF, DR, RB, CAP, PR, SF)})
