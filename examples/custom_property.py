"""A property of your own, written the same way as the built-ins: a table.

"Every admitted floor-entitled request is dispatched within X seconds of its
admission." One instance per request; clock ``y`` is reset at ``admit``; a
timer edge fires once y exceeds X while the request is still queued.

Run: python examples/custom_property.py
"""

from __future__ import annotations

from enum import Enum

from rvguard.contract import contract_from_mapping
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, EventKind
from rvguard.monitors import Edge, Instance, Monitor, TimedAutomaton, Timer

MAX_QUEUE_WAIT = 0.5  # X, seconds


class Loc(Enum):
    NEW = "new"
    WAITING_ADMIT = "waiting_admit"
    QUEUED = "queued"
    OK = "ok"
    BAD = "bad"


def _entitled(inst: Instance, ev: Event) -> bool:
    return inst.entitled


def _reset_y(inst: Instance, ev: Event) -> None:
    inst.resets["y"] = ev.t


def _queue_deadline(inst: Instance) -> float:
    return inst.resets["y"] + MAX_QUEUE_WAIT


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    return f"admitted at {inst.resets['y']:g} s but not dispatched within {MAX_QUEUE_WAIT} s"


TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, EventKind.ARRIVE): (Edge(Loc.WAITING_ADMIT, _entitled, "entitled"), Edge(Loc.OK)),
    (Loc.WAITING_ADMIT, EventKind.ADMIT): (Edge(Loc.QUEUED, update=_reset_y, label="y := 0"),),
    (Loc.QUEUED, EventKind.DISPATCH): (Edge(Loc.OK),),
}

QUEUE_WAIT = TimedAutomaton(
    name="QW",
    description=f"entitled requests are dispatched within {MAX_QUEUE_WAIT} s of admission",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.BAD}),
    transitions=TRANSITIONS,
    timers=(Timer(Loc.QUEUED, _queue_deadline, Loc.BAD, f"y > {MAX_QUEUE_WAIT}", _detail),),
)

CONTRACT = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 1,
        "service": {"s_max": 0.4},
        "tenants": {"assured": {"floor": 3, "deadline": 2.0}},
    }
)

TRACE: list[Event] = [
    Arrive(0.0, "r1", "assured"),
    Admit(0.0, "r1", Basis.FLOOR),
    Dispatch(0.1, "r1"),
    Arrive(0.2, "r2", "assured"),
    Admit(0.2, "r2", Basis.FLOOR),
    Complete(0.5, "r1"),
    Dispatch(0.9, "r2"),  # waited 0.7 s in the queue
    Complete(1.2, "r2"),
]


def main() -> None:
    monitor = Monitor(CONTRACT, properties=["WF", "SF", QUEUE_WAIT])
    monitor.feed_all(TRACE)
    for v in monitor.violations():
        print(f"{v.property} {v.rid} t={v.t:g}: {v.detail}")
    print(f"{len(monitor.violations())} violation(s)")


if __name__ == "__main__":
    main()
