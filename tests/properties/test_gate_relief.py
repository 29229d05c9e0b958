"""Demote, restore and evict go through a user's tables too (`rvguard.enforce.gate.Gate.allow`):
each is a controllable event a table may forbid. Forbidden, it is kept back whatever the remedy (a
demotion leaves the request queued, and no surplus is dispatched while the redline fires; a restore
leaves it held until a later sample; a voluntary eviction leaves it running); an emergency eviction
(the hard floor's relief, EV) goes first and the conflict is a ``shield`` alert record naming EV.
Without the gate the same steps break the table."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.gate import Gate, tables_hook
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.redline import HeadroomSample, RedlineConfig, ResourceLimit
from rvguard.enforce.request import Request
from rvguard.events import Event, Proposal, Watch
from rvguard.lifecycle import Stage
from rvguard.properties import PropertyTable, TableMonitor
from rvguard.properties.load import table_from_mapping

from ..enforce._harness import make_contract

CONTRACT = make_contract(slots=1, floor=2)
CONFIG = RedlineConfig((ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05),), alpha=1.0)


def _table(name: str, edges: list[dict[str, Any]], **more: Any) -> PropertyTable:
    return table_from_mapping(
        {
            "name": name,
            "description": f"test table {name}",
            "locations": ["NEW", "LIVE", "HELD", "BAD"],
            "initial": "NEW",
            "bad": "BAD",
            "edges": [{"from": "NEW", "event": "admit", "to": "LIVE"}, *edges],
            **more,
        }
    )


NO_DEMOTE = _table("NO_DEMOTE", [{"from": "LIVE", "event": "demote", "to": "BAD", "remedy": "suppress"}])
#: a held request is restored no sooner than ``hold`` seconds after its demotion
SLOW_RESTORE = _table(
    "SLOW_RESTORE",
    [
        {"from": "LIVE", "event": "demote", "update": ["since = t"], "to": "HELD"},
        {"from": "HELD", "event": "restore", "guard": "t - since >= hold", "to": "LIVE"},
        {"from": "HELD", "event": "restore", "guard": "t - since < hold", "to": "BAD", "remedy": "delay"},
    ],
    params={"hold": 1.0},
    counters={"since": {"scope": "request"}},
)
NO_EVICT = _table("NO_EVICT", [{"from": "LIVE", "event": "evict", "to": "BAD", "remedy": "suppress"}])


def _core(table: PropertyTable | None) -> tuple[DecisionCore, Gate | None, list[Event]]:
    core = DecisionCore(CONTRACT, redline=CONFIG)
    hook = None if table is None else tables_hook(core, [table], None)
    assert hook is None or isinstance(hook, Gate)
    return core, hook, []


def _step(core: DecisionCore, gate: Gate | None, trace: list[Event], events: list[Event]) -> list[Event]:
    """The Guard's delivery: the events, then the gate's alert records; the core's invariants hold."""
    core._check()
    events = events if gate is None else gate.through(events)
    trace += events
    return events


def _arrive(
    core: DecisionCore, gate: Gate | None, trace: list[Event], rid: str, tenant: str, t: float
) -> None:
    _step(core, gate, trace, core.arrive(Request(rid, tenant, t), Proposal(), t))


def _sample(core: DecisionCore, gate: Gate | None, trace: list[Event], value: float, t: float) -> list[Event]:
    return _step(core, gate, trace, core.observe(HeadroomSample("kv_cache", value, t), t))


def _kinds(events: list[Event], kind: str) -> list[str]:
    return [e.rid for e in events if e.kind.value == kind]


def _fire_with_surplus_queued(table: PropertyTable | None) -> tuple[DecisionCore, Gate | None, list[Event]]:
    """a1 (floor) runs in the one slot, o1 and o2 (surplus) wait; the redline fires at 1.0."""
    core, gate, trace = _core(table)
    _arrive(core, gate, trace, "a1", "assured", 0.0)
    _arrive(core, gate, trace, "o1", "opp", 0.0)
    _arrive(core, gate, trace, "o2", "opp", 0.1)
    _sample(core, gate, trace, 0.1, 1.0)
    return core, gate, trace


def test_a_forbidden_demotion_leaves_the_request_queued_and_not_dispatched() -> None:
    core, _, bare = _fire_with_surplus_queued(None)
    assert _kinds(bare, "demote") == ["o1", "o2"]
    assert len(TableMonitor(CONTRACT, [NO_DEMOTE]).feed_all(bare)) == 2

    core, gate, trace = _fire_with_surplus_queued(NO_DEMOTE)
    assert gate is not None and _kinds(trace, "demote") == [] and gate.withheld == 2
    assert core.held == 0 and core.queue_depth == 2
    _step(core, gate, trace, core.finish("a1", 1.5))  # a free slot while the redline fires: no surplus goes
    assert _kinds(trace, "dispatch") == ["a1"]
    _sample(core, gate, trace, 0.9, 2.0)  # clear: the queued surplus is dispatched, never demoted
    assert _kinds(trace, "dispatch") == ["a1", "o1"]
    assert TableMonitor(CONTRACT, [NO_DEMOTE]).feed_all(trace) == []


def test_a_restore_too_soon_waits_for_a_later_sample() -> None:
    def run(table: PropertyTable | None) -> tuple[DecisionCore, list[Event]]:
        core, gate, trace = _fire_with_surplus_queued(table)
        _sample(core, gate, trace, 0.9, 1.5)  # clear, 0.5 s after the demotions
        if table is not None:
            assert _kinds(trace, "restore") == [] and core.held == 2  # kept held
            assert gate is not None and gate.withheld == 2
        _sample(core, gate, trace, 0.9, 2.5)  # clear again, 1.5 s after: restored
        return core, trace

    _, bare = run(None)
    assert len(TableMonitor(CONTRACT, [SLOW_RESTORE]).feed_all(bare)) == 2
    core, trace = run(SLOW_RESTORE)
    assert _kinds(trace, "restore") == ["o1", "o2"] and core.held == 0
    assert {e.t for e in trace if e.kind.value == "restore"} == {2.5}
    assert TableMonitor(CONTRACT, [SLOW_RESTORE]).feed_all(trace) == []


def _running_surplus(table: PropertyTable | None) -> tuple[DecisionCore, Gate | None, list[Event]]:
    core, gate, trace = _core(table)
    _arrive(core, gate, trace, "o1", "opp", 0.0)
    assert core._live["o1"].state is Stage.DISPATCHED
    return core, gate, trace


def test_a_forbidden_voluntary_eviction_leaves_the_request_running() -> None:
    core, gate, trace = _running_surplus(None)
    _step(core, gate, trace, core.evict("o1", 1.0, 40, "voluntary"))
    assert len(TableMonitor(CONTRACT, [NO_EVICT]).feed_all(trace)) == 1

    core, gate, trace = _running_surplus(NO_EVICT)
    assert _step(core, gate, trace, core.evict("o1", 1.0, 40, "voluntary")) == []
    assert core._live["o1"].state is Stage.DISPATCHED and core.statistics().evicted == 0
    assert gate is not None and gate.withheld == 1 and gate.alerts == []
    assert TableMonitor(CONTRACT, [NO_EVICT]).feed_all(trace) == []


def test_an_emergency_eviction_comes_first_and_the_conflict_is_traced() -> None:
    core, gate, trace = _running_surplus(NO_EVICT)
    out = _step(core, gate, trace, core.evict("o1", 1.0, 40, "emergency", resource="kv_cache", headroom=0.01))
    assert _kinds(out, "evict") == ["o1"] and core._live["o1"].state is Stage.EVICTED
    (record,) = [e for e in out if isinstance(e, Watch)]
    assert record.condition == "shield"
    assert {k: record.extra[k] for k in ("property", "request", "event", "first")} == {
        "property": "NO_EVICT",
        "request": "o1",
        "event": "evict",
        "first": "EV",
    }
    (broken,) = TableMonitor(CONTRACT, [NO_EVICT]).feed_all(trace)
    assert (broken.t, broken.rid) == (record.t, "o1")


@pytest.mark.parametrize("table", [NO_DEMOTE, SLOW_RESTORE, NO_EVICT], ids=lambda t: t.name)
def test_the_tables_are_enforceable_controllable_events(table: PropertyTable) -> None:
    """Each bad edge is on a controllable kind, so the gate remedies it (not monitor-only)."""
    assert not table.monitor_only
    assert all(e.is_controllable() for e in table.edges if e.target == table.bad)


def test_the_guard_does_not_stop_a_request_whose_eviction_a_table_forbids() -> None:
    """`Guard.evict_now`: a forbidden voluntary eviction writes nothing and stops nothing (False);
    an emergency one is written with its ``shield`` record and stops the request (True)."""

    async def main() -> tuple[bool, bool, list[Event], list[str]]:
        release, trace = asyncio.Event(), []

        async def handler(request: Request) -> Response:
            await release.wait()
            return Response()

        guard = Guard(
            CONTRACT,
            MockDispatcher(handler),
            sinks=[trace.append],
            clock=ManualClock(),
            config=GuardConfig(properties=[NO_EVICT], learner_timeout=None, watch=None),
        )
        async with guard:
            task = asyncio.create_task(guard.submit(Request("o1", "opp", 0.0)))
            for _ in range(3):
                await asyncio.sleep(0)
            voluntary = guard.evict_now("o1", 40, "voluntary")
            running = list(guard.running()) + list(guard.preemption.noticed)
            emergency = guard.evict_now("o1", 40, "emergency", resource="kv_cache", headroom=0.01)
            release.set()
            await asyncio.gather(task, return_exceptions=True)
        return voluntary, emergency, trace, running

    voluntary, emergency, trace, running = asyncio.run(main())
    assert (voluntary, emergency) == (False, True)
    assert running == ["o1"]  # still running after the refusal, and no preemption notice left
    assert _kinds(trace, "evict") == ["o1"]
    (record,) = [e for e in trace if isinstance(e, Watch)]
    assert record.extra["first"] == "EV"
    assert [e.reason for e in trace if e.kind.value == "fail"] == ["preempted"]  # type: ignore[attr-defined]
