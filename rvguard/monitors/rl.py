"""RL — redline: demotions on fresh samples, of surplus work only, toggles bounded (DESIGN §10).

Theory of operation
-------------------
RL learns each resource's samples from the node events (`TimedAutomaton.node`:
a ``sample`` has no request): per resource the freshest ``sample_time``
seen and ``n``, the number of *fresh* samples (newer than every earlier
one of that resource; a stale or duplicate sample is not counted, as the
redline ignores it). Then, at each request's events:

* a ``demote`` must cite a fresh sample of its resource: one at or before
  it in the trace (its ``sample_time`` is not newer than the freshest
  recorded) and at most ``headroom.staleness`` old at the demotion;
* only surplus work is demoted: a floor-entitled request, or one admitted
  with basis ``floor``, never is (`pr.protected`); a request this guard did
  not admit cannot be demoted at all (WF: only a queued request may be);
* toggles are bounded: per resource, a ``demote`` after a ``restore`` (or
  the first) and a ``restore`` after a ``demote`` are toggles of the
  redline (the many demotions of one episode are one), and after ``n``
  fresh samples there are at most 2⌈n / (dwell + 1)⌉ of them — the
  redline's hysteresis bound (`rvguard.enforce.redline`).

Each failing event is a bad prefix at that event. The bad locations are
not final: the request goes on, and a later violation is reported too.
Toggles counted this way never exceed the redline's own (an episode's
demotions cite one resource; a restore follows a clear), so a guard that
acts on the redline never violates the bound.

Cost: O(1) per event and per sample; memory O(resources).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from ..contract import Contract
from ..errors import SpecError
from ..events import Demote, Event, EventKind, Restore, Sample
from .automaton import Edge, Instance, TimedAutomaton
from .pr import protected

__all__ = ["RL", "TRANSITIONS", "Loc", "toggle_bound"]


class Loc(Enum):
    """RL locations of one request."""

    NEW = "new"
    SURPLUS = "surplus"
    GUARDED = "guarded"  # protected: never to be demoted
    SURPLUS_BAD = "surplus-bad"  # bad (a surplus request's demotion or restore broke RL)
    GUARDED_BAD = "guarded-bad"
    DONE = "done"


K = EventKind


def toggle_bound(n: int, dwell: int) -> int:
    """The most toggles a resource may make in ``n`` fresh samples: 2⌈n / (dwell + 1)⌉."""
    return 2 * -(-n // (dwell + 1))


def _shared(contract: Contract) -> dict[str, Any]:
    if contract.headroom is None:  # pragma: no cover - resolve_properties refuses RL first
        raise SpecError("property RL needs the contract's headroom block", field="headroom")
    h = contract.headroom
    return {"staleness": h.staleness, "dwell": h.dwell, "fresh": {}, "n": {}, "toggles": {}, "last": {}}


def _sample(state: dict[str, Any], ev: Event) -> None:
    """A node event: a fresh sample (newer than every earlier one of its resource) is counted."""
    if isinstance(ev, Sample) and ev.sample_time > state["fresh"].get(ev.resource, -math.inf):
        state["fresh"][ev.resource] = ev.sample_time
        state["n"][ev.resource] = state["n"].get(ev.resource, 0) + 1


def _toggles(state: dict[str, Any], ev: Demote | Restore) -> int:
    """The resource's toggles with this event counted (if it toggles)."""
    last = state["last"].get(ev.resource)
    toggles = int(state["toggles"].get(ev.resource, 0))
    flips = last != "demote" if isinstance(ev, Demote) else last == "demote"
    return toggles + 1 if flips else toggles


def _within(inst: Instance, ev: Event) -> bool:
    assert isinstance(ev, Demote | Restore)
    state = inst.shared["RL"]
    return _toggles(state, ev) <= toggle_bound(state["n"].get(ev.resource, 0), state["dwell"])


def _fresh(state: dict[str, Any], ev: Demote) -> bool:
    freshest = state["fresh"].get(ev.resource)
    return freshest is not None and ev.sample_time <= freshest and ev.t - ev.sample_time <= state["staleness"]


def _ok_demote(inst: Instance, ev: Event) -> bool:
    assert isinstance(ev, Demote)
    return _fresh(inst.shared["RL"], ev) and _within(inst, ev)


def _account(inst: Instance, ev: Event) -> None:
    """Record what the event did (for the witness's context), then count its toggle."""
    assert isinstance(ev, Demote | Restore)
    state = inst.shared["RL"]
    res = ev.resource
    toggles = _toggles(state, ev)
    inst.vars.update(
        rl_kind=ev.kind.value,
        rl_resource=res,
        rl_freshest=state["fresh"].get(res),
        rl_fresh=_fresh(state, ev) if isinstance(ev, Demote) else True,
        rl_toggles=toggles,
        rl_bound=toggle_bound(state["n"].get(res, 0), state["dwell"]),
        rl_samples=state["n"].get(res, 0),
        rl_staleness=state["staleness"],
        rl_sample_time=ev.sample_time,
    )
    state["toggles"][res] = toggles
    state["last"][res] = "demote" if isinstance(ev, Demote) else "restore"


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    v = inst.vars
    why = []
    if v["rl_kind"] == "demote" and v.get("rl_guarded"):
        why.append("a floor-entitled or assured request was demoted (only surplus work may be)")
    if not v["rl_fresh"]:
        if v["rl_freshest"] is None:
            why.append(f"no sample of {v['rl_resource']!r} was recorded before the demotion")
        elif v["rl_sample_time"] > v["rl_freshest"]:
            why.append(f"the demotion cites a sample of {v['rl_resource']!r} the trace does not hold")
        else:
            age = now - v["rl_sample_time"]
            why.append(f"the cited sample is {age:g} s old > staleness {v['rl_staleness']:g} s")
    if v["rl_toggles"] > v["rl_bound"]:
        why.append(
            f"{v['rl_toggles']} toggles of {v['rl_resource']!r} in {v['rl_samples']} fresh samples "
            f"> 2⌈n/(dwell+1)⌉ = {v['rl_bound']}"
        )
    return "; ".join(why)


def _account_guarded(inst: Instance, ev: Event) -> None:
    """`_account` for a protected request (its demotion is out of scope)."""
    inst.vars["rl_guarded"] = True
    _account(inst, ev)


_S, _G = (Loc.SURPLUS, Loc.SURPLUS_BAD), (Loc.GUARDED, Loc.GUARDED_BAD)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (
        Edge(Loc.GUARDED, protected, "entitled or basis = floor"),
        Edge(Loc.SURPLUS, label="surplus"),
    ),
    **{
        (loc, K.DEMOTE): (
            Edge(Loc.SURPLUS, _ok_demote, "fresh sample, toggles within bound", update=_account),
            Edge(Loc.SURPLUS_BAD, label="stale sample or too many toggles", update=_account, detail=_detail),
        )
        for loc in _S
    },
    **{(loc, K.DEMOTE): (Edge(Loc.GUARDED_BAD, update=_account_guarded, detail=_detail),) for loc in _G},
    **{
        (loc, K.RESTORE): (
            Edge(ok, _within, "toggles within bound", update=_account),
            Edge(bad, label="too many toggles", update=_account, detail=_detail),
        )
        for group, ok, bad in ((_S, Loc.SURPLUS, Loc.SURPLUS_BAD), (_G, Loc.GUARDED, Loc.GUARDED_BAD))
        for loc in group
    },
}


def _context(inst: Instance) -> Mapping[str, Any]:
    v = inst.vars
    return {
        "resource": v["rl_resource"],
        "sample_time": v["rl_sample_time"],
        "freshest_sample": v["rl_freshest"],
        "staleness": v["rl_staleness"],
        "toggles": v["rl_toggles"],
        "fresh_samples": v["rl_samples"],
        "toggle_bound": v["rl_bound"],
    }


RL = TimedAutomaton(
    name="RL",
    description="every demotion cites a fresh sample, only surplus work is demoted, toggles ≤ 2⌈n/(dwell+1)⌉",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.SURPLUS_BAD, Loc.GUARDED_BAD}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
    node=_sample,
)
