"""EV — eviction: at most k in flight, none while credited headroom reaches the target, never of a
protected request (DESIGN §10).

Theory of operation
-------------------
An eviction is *in flight* from its ``evict`` until the request is
``relocate``-d (queued again) or ends (``fail``). EV's variable is shared
by all requests (`shared`): the evicted requests in flight, in eviction
order; the contract's ``eviction.k`` bounds their number. An ``evict``
is a bad prefix when k are already in flight, or when the request is
protected (floor-entitled or admitted on the floor: `pr.protected`),
which the emergency channel must never pick; or when it is an
*emergency* eviction issued while the **credited headroom** already reaches
the target (the runbook's "no redundant eviction"). The bad locations are
not final: the request still relocates or ends, so the count stays exact
after a violation, and each later violating eviction is reported too.

The credited-headroom rule reads what the channel recorded on the
``evict`` (`rvguard.events.Evict`): ``headroom``, the measured headroom
fraction of ``resource`` it acted on, and judges it against the contract's
``eviction.target`` and ``eviction.capacity`` when the contract states them,
else the record's own ``target`` and ``capacity`` (as FR reads a route's own
bounds without a fleet block). Credited headroom = headroom + the relief
(state / capacity) of every eviction still *credited*: one that recorded a
``resource`` stays credited from its ``evict`` until a fresh ``sample`` of
that resource taken after it (sample time later than both the eviction and
every earlier sample of the resource) is recorded — only then does the
measured headroom include its relief. An emergency eviction is a bad prefix
when ``(target − headroom) · capacity − Σ credited state ≤ 0`` (compared in
tokens, as the planner does, so the two make the same float operations). An
eviction that records no headroom, or with no target or capacity anywhere,
is not judged on this rule; EV takes the recorded headroom as given (the
Guard records its redline's Ĥ; an independent check re-deriving it from the
samples is in the tests).

Cost: O(1) per event but an ``evict`` or a ``sample``, O(credited evictions) for those; memory
O(evictions in flight and credited + resources).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..contract import Contract
from ..errors import SpecError
from ..events import Event, EventKind, Evict, Sample
from ..runbook_events import EMERGENCY
from .automaton import Edge, Instance, TimedAutomaton
from .pr import protected

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
    return {
        "k": block.k,
        "evicting": {},
        "target": block.target,
        "capacity": block.capacity,
        "credit": [],
        "fresh": {},
    }


def _sample(state: dict[str, Any], ev: Event) -> None:
    """A node event: a fresh sample of a resource lands the credited evictions it was taken after."""
    if not isinstance(ev, Sample):
        return
    fresh: dict[str, float] = state["fresh"]
    if not ev.sample_time > fresh.get(ev.resource, -math.inf):
        return
    fresh[ev.resource] = ev.sample_time
    credit: list[tuple[str, int, str, float]] = state["credit"]
    if credit:
        state["credit"] = [c for c in credit if c[2] != ev.resource or not ev.sample_time > c[3]]


def _gap(state: dict[str, Any], ev: Evict) -> tuple[float, float, int] | None:
    """An emergency eviction's (state tokens still to free, target, capacity) before it was issued;
    ``None`` when it is not judged on the credited-headroom rule (module doc)."""
    target = state["target"] if state["target"] is not None else ev.target
    capacity = state["capacity"] if state["capacity"] is not None else ev.capacity
    if ev.reason != EMERGENCY or ev.headroom is None or target is None or capacity is None:
        return None
    credited = sum(c[1] for c in state["credit"])
    return (target - ev.headroom) * capacity - credited, target, capacity


def _room(inst: Instance, ev: Event) -> bool:
    """Fewer than k in flight, and the credited headroom below the target (when judged)."""
    assert isinstance(ev, Evict)
    state = inst.shared["EV"]
    gap = _gap(state, ev)
    return len(state["evicting"]) < int(state["k"]) and (gap is None or gap[0] > 0)


def _take(inst: Instance, ev: Event) -> None:
    assert isinstance(ev, Evict)
    state = inst.shared["EV"]
    evicting: dict[str, None] = state["evicting"]
    gap = _gap(state, ev)
    inst.vars.update(
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
    v = inst.vars
    why = []
    if v["ev_protected"]:
        why.append(
            "a floor-entitled or assured request was evicted: the emergency channel takes surplus work only"
        )
    if v["ev_in_flight"] > v["ev_limit"]:
        why.append(f"eviction made {v['ev_in_flight']} evictions in flight > k = {v['ev_limit']}")
    gap = v["ev_gap"]
    if gap is not None and not gap[0] > 0:
        _, target, capacity = gap
        why.append(
            f"emergency eviction issued while the credited headroom already reaches the target {target:g}: "
            f"measured {v['ev_headroom']:g} + {v['ev_credited_state']} state tokens of "
            f"{len(v['ev_credited'])} credited eviction(s) / capacity {capacity}"
        )
    return "; ".join(why)


_TAKE = Edge(Loc.EVICTED, _room, "fewer than k in flight, credited headroom below the target", update=_take)
_OVER = Edge(
    Loc.OVER, label="k in flight already, or credited headroom at the target", update=_take, detail=_detail
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
        "capacity": None if v["ev_gap"] is None else v["ev_gap"][2],
    }


EV = TimedAutomaton(
    name="EV",
    description="at most k evictions in flight, none while credited headroom reaches the target, "
    "never of an assured or floor-entitled request",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.OVER}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
    node=_sample,
)
