"""EV — eviction: at most k in flight, never of a protected request; an emergency one recorded,
triggered and not redundant (DESIGN §10, §11).

Theory of operation
-------------------
An eviction is *in flight* from its ``evict`` until the request is
``relocate``-d (queued again) or ends (``fail``). EV's variable is shared
by all requests (`shared`): the evicted requests in flight, in eviction
order; the contract's ``eviction.k`` bounds their number. An ``evict``
is a bad prefix when k are already in flight, or when the request is
protected (floor-entitled or admitted on the floor: `pr.protected`),
which the emergency channel must never pick; or when an emergency eviction
breaks one of the clauses below. The bad locations are
not final: the request still relocates or ends, so the count stays exact
after a violation, and each later violating eviction is reported too.

An *emergency* eviction (reason ``emergency``) is judged on what the
channel recorded on the ``evict`` (`rvguard.events.Evict`), three more clauses:

* **it records what it acted on**: ``resource`` and ``headroom``, the
  measured (smoothed) headroom fraction of that resource. One that records
  neither is a bad prefix: EV does not reconstruct a decision from the last
  recorded sample, because the trigger and the credited rule are about what
  the channel saw when it chose, and a record with no evidence that passed
  would make the clauses below unable to fail;
* **the headroom it records is the trace's**: where the contract has a
  ``headroom`` block and a fresh ``sample`` of the resource was recorded
  before the eviction, the recorded headroom is the redline's Ĥ replayed
  from those samples (`rvguard.monitors.replay`, the EWMA RL replays; equal
  up to float rounding, 1e-9 relative): a channel that records a headroom
  its telemetry never showed would pass the two clauses below on a
  number of its own making. With no sample of the resource recorded (or no
  ``headroom`` block), the record is taken as it stands;
* **its trigger**: the recorded headroom is below the resource's
  ``hard_floor`` (the contract's ``headroom`` block; a resource it does not
  state, or a hard floor of 0, is never crossed). Without a ``headroom``
  block the trigger is not judged (the Guard then has no redline and no
  emergency channel);
* **no redundant eviction**: credited headroom = headroom + the relief
  (state / capacity) of every eviction still *credited* — one that recorded
  a ``resource`` stays credited from its ``evict`` until a fresh ``sample``
  of that resource taken after it (sample time later than both the eviction
  and every earlier sample of the resource) is recorded. The eviction is a
  bad prefix when that already reaches the target: ``(target − headroom) ·
  capacity − Σ credited state ≤ 0``, decided on the decimals
  (`rvguard.exact.tokens_short`, the planner's own comparison), so an exact
  tie is reached. Target and capacity are the contract's ``eviction``
  block's when it states them, else the record's own (not judged with
  neither);
Whether the relief lands before the node's deadline is not EV's: the
Guard cannot enforce it (it depends on the node's trend, the overhead and
the link), so it is its own monitored property, ER (`rvguard.monitors.er`).

Cost: O(1) per event but an ``evict`` or a ``sample``, O(credited evictions) for those; memory
O(evictions in flight and credited + resources).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from enum import Enum
from fractions import Fraction
from typing import Any

from ..contract import Contract
from ..errors import SpecError
from ..events import Event, EventKind, Evict, Sample
from ..exact import tokens_short
from ..runbook_events import EMERGENCY
from .automaton import Edge, Instance, TimedAutomaton
from .pr import protected
from .replay import ResourceReplay, replays

__all__ = ["EV", "SHOWN", "TRANSITIONS", "Loc"]

#: how many of the other evictions in flight a violation names
SHOWN = 16


class Loc(Enum):
    """EV locations of one request."""

    NEW = "new"
    READY = "ready"  # admitted, surplus
    GUARDED = "guarded"  # admitted, protected: never to be evicted
    EVICTED = "evicted"
    OVER = "over"  # bad: beyond k, a protected request, or redundant (it still relocates or ends)
    DONE = "done"


K = EventKind


def _shared(contract: Contract) -> dict[str, Any]:
    block = contract.eviction
    if block is None:  # pragma: no cover - resolve_properties refuses EV first
        raise SpecError("property EV needs the contract's eviction block (k)", field="eviction")
    # credit: (rid, state, resource, after) per credited eviction; fresh: resource -> newest sample_time
    h = contract.headroom
    floors = None if h is None else {name: r.hard_floor for name, r in h.resources.items()}
    return {
        "floors": floors,
        "k": block.k,
        "evicting": {},
        "target": block.target,
        "capacity": block.capacity,
        "credit": [],
        "fresh": {},
        "spec": h,
        "replay": None if h is None else replays(h),  # resource -> the redline replayed from its samples
    }


def _sample(state: dict[str, Any], ev: Event) -> None:
    """A node event: a fresh sample of a resource lands the credited evictions it was taken after."""
    if not isinstance(ev, Sample):
        return
    fresh: dict[str, float] = state["fresh"]
    if not ev.sample_time > fresh.get(ev.resource, -math.inf):
        return
    fresh[ev.resource] = ev.sample_time
    table: dict[str, ResourceReplay] | None = state["replay"]
    if table is not None:
        replay = table.get(ev.resource)
        if replay is None:  # a resource the contract does not state: its Ĥ all the same
            replay = table[ev.resource] = ResourceReplay(None, state["spec"])
        replay.observe(ev.value, ev.sample_time, ev.t, state["spec"].staleness)
    credit: list[tuple[str, int, str, float]] = state["credit"]
    if credit:
        state["credit"] = [c for c in credit if c[2] != ev.resource or not ev.sample_time > c[3]]


def _gap(state: dict[str, Any], ev: Evict) -> tuple[Fraction, float, int] | None:
    """An emergency eviction's (state tokens still to free, target, capacity) before it was issued;
    ``None`` when it is not judged on the credited-headroom rule (module doc)."""
    target = state["target"] if state["target"] is not None else ev.target
    capacity = state["capacity"] if state["capacity"] is not None else ev.capacity
    if ev.reason != EMERGENCY or ev.headroom is None or target is None or capacity is None:
        return None
    credited = sum(c[1] for c in state["credit"])
    return tokens_short(target, ev.headroom, capacity, credited), target, capacity


def _replayed(state: dict[str, Any], ev: Evict) -> list[str]:
    """Whether the recorded headroom is the Ĥ replayed from the trace's samples (module doc)."""
    table: dict[str, ResourceReplay] | None = state["replay"]
    replay = None if table is None or ev.resource is None else table.get(ev.resource)
    if replay is None or replay.last is None or ev.headroom is None:
        return []
    smoothed = replay.last.smoothed
    if math.isclose(ev.headroom, smoothed, rel_tol=1e-9, abs_tol=1e-12):
        return []
    return [
        f"emergency eviction records headroom {ev.headroom:g} of {ev.resource!r}, but the samples "
        f"recorded before it give Ĥ = {smoothed:g}"
    ]


def _emergency_faults(state: dict[str, Any], ev: Evict) -> list[str]:
    """The emergency clauses ``ev`` breaks (module doc): record, trigger, redundancy, deadline."""
    if ev.reason != EMERGENCY:
        return []
    if ev.resource is None or ev.headroom is None:
        return ["an emergency eviction that records no resource and headroom: its trigger cannot be judged"]
    why = _replayed(state, ev)
    floors: dict[str, float] | None = state["floors"]
    if floors is not None and not ev.headroom < floors.get(ev.resource, 0.0):
        floor = floors.get(ev.resource, 0.0)
        why.append(
            f"emergency eviction without its trigger: headroom {ev.headroom:g} of {ev.resource!r} "
            f"is not below its hard floor {floor:g}"
        )
    gap = _gap(state, ev)
    if gap is not None and not gap[0] > 0:
        credited = sum(c[1] for c in state["credit"])
        why.append(
            f"emergency eviction issued while the credited headroom already reaches the target {gap[1]:g}: "
            f"measured {ev.headroom:g} + {credited} state tokens of {len(state['credit'])} credited "
            f"eviction(s) / capacity {gap[2]}"
        )
    return why


def _faults(state: dict[str, Any], ev: Evict, guarded: bool) -> list[str]:
    """Every EV clause the eviction breaks, as the witness's detail says them."""
    why = []
    if guarded:
        why.append(
            "a floor-entitled or assured request was evicted: the emergency channel takes surplus work only"
        )
    if len(state["evicting"]) >= int(state["k"]):
        why.append(f"eviction made {len(state['evicting']) + 1} evictions in flight > k = {state['k']}")
    return why + _emergency_faults(state, ev)


def _room(inst: Instance, ev: Event) -> bool:
    """Every clause holds for a surplus request's eviction."""
    assert isinstance(ev, Evict)
    return not _faults(inst.shared["EV"], ev, guarded=False)


def _take(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Evict)
    state = inst.shared["EV"]
    evicting: dict[str, None] = state["evicting"]
    gap = _gap(state, ev)
    inst.vars.update(
        ev_why=_faults(state, ev, guarded=inst.vars.get("ev_guarded", False)),
        ev_limit=state["k"],
        ev_in_flight=len(evicting) + 1,
        ev_others=tuple(itertools.islice(evicting, SHOWN)),
        ev_protected=inst.vars.get("ev_guarded", False),
        ev_gap=gap,
        ev_headroom=ev.headroom,
        ev_credited=tuple(c[0] for c in itertools.islice(state["credit"], SHOWN)),
        ev_credited_state=sum(c[1] for c in state["credit"]),
    )
    evicting[inst.rid] = None
    if ev.resource is not None:
        after = max(ev.t, state["fresh"].get(ev.resource, -math.inf))
        state["credit"].append((inst.rid, ev.state, ev.resource, after))


def _take_guarded(inst: Instance, ev: Event) -> None:
    """`_take` for a protected request (which eviction must never pick)."""
    inst.vars["ev_guarded"] = True
    _take(inst, ev)


def _was_guarded(inst: Instance, ev: Event) -> bool:
    return bool(inst.vars.get("ev_guarded", False))


def _release(inst: Instance, ev: Event) -> None:
    inst.shared["EV"]["evicting"].pop(inst.rid, None)


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    return "; ".join(inst.vars["ev_why"])


_TAKE = Edge(
    Loc.EVICTED,
    _room,
    "fewer than k in flight; an emergency one recorded, triggered, not redundant",
    update=_take,
)
_OVER = Edge(
    Loc.OVER,
    label="k in flight already, or an emergency clause broken",
    update=_take,
    detail=_detail,
)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (
        Edge(Loc.GUARDED, protected, "entitled or basis = floor"),
        Edge(Loc.READY, label="surplus"),
    ),
    (Loc.READY, K.EVICT): (_TAKE, _OVER),
    (Loc.GUARDED, K.EVICT): (Edge(Loc.OVER, label="protected", update=_take_guarded, detail=_detail),),
    **{
        (loc, K.RELOCATE): (
            Edge(Loc.GUARDED, _was_guarded, "protected", update=_release),
            Edge(Loc.READY, label="surplus", update=_release),
        )
        for loc in (Loc.EVICTED, Loc.OVER)
    },
    **{(loc, K.FAIL): (Edge(Loc.DONE, update=_release),) for loc in (Loc.EVICTED, Loc.OVER)},
}


def _context(inst: Instance) -> Mapping[str, Any]:
    v = inst.vars
    return {
        "limit": v["ev_limit"],
        "evictions_in_flight": v["ev_in_flight"],
        "others": list(v["ev_others"]),
        "protected": v["ev_protected"],
        "headroom": v["ev_headroom"],
        "credited_state": v["ev_credited_state"],
        "credited_evictions": list(v["ev_credited"]),
        "target": None if v["ev_gap"] is None else v["ev_gap"][1],
        "short_tokens": None if v["ev_gap"] is None else str(v["ev_gap"][0]),
        "capacity": None if v["ev_gap"] is None else v["ev_gap"][2],
    }


EV = TimedAutomaton(
    name="EV",
    description="at most k evictions in flight, never of an assured or floor-entitled request; an "
    "emergency one records its headroom (the samples' Ĥ), is below the hard floor, and is not "
    "redundant (credited headroom below the target, exactly)",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.OVER}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
    node=_sample,
)
