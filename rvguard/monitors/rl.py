"""RL — redline: demotions justified by a fresh sample, of surplus work only, restores on fresh
telemetry, toggles bounded (DESIGN §10, §11).

Theory of operation
-------------------
RL learns each resource's samples from the node events (`TimedAutomaton.node`:
a ``sample`` has no request): per resource the freshest ``sample_time``
seen and ``n``, the number of *fresh* samples (newer than every earlier
one of that resource; a stale or duplicate sample is not counted, as the
redline ignores it), and, for each resource the contract's ``headroom``
block states, the redline replayed over those samples (`replay`: Ĥ, its
projection, and whether the resource fires by the hysteresis rule). Then,
at each request's events:

* a ``demote`` cites a sample: its ``sample_time`` must be one a recorded
  fresh sample of its resource has (exactly), at most
  ``headroom.staleness`` old at the demotion, and it must *justify* it:
  the redline replayed up to that sample fires on the resource (Ĥ or its
  projection below ``h_min``, or still firing by the hysteresis), and the
  resource still fires at the demotion (no later sample cleared it);
* only surplus work is demoted: a floor-entitled request, or one admitted
  with basis ``floor``, never is (`pr.protected`); a request this guard did
  not admit cannot be demoted at all (WF: only a queued request may be);
* a ``restore`` cites a sample the same way (recorded, exactly), at most
  ``staleness`` old at the restore — stale telemetry never restores — and
  the replayed redline must be clear then (no resource the contract
  states fires);
* toggles are bounded: per resource, a ``demote`` after a ``restore`` (or
  the first) and a ``restore`` after a ``demote`` are toggles of the
  redline (the many demotions of one episode are one), and after ``n``
  fresh samples there are at most 2⌈n / (dwell + 1)⌉ of them — the
  redline's hysteresis bound (`rvguard.enforce.redline`). The toggle that
  *crosses* the bound is reported; later ones while the count stays above
  it are not (one excess, one report), and a crossing after the bound
  has caught up again is reported anew.

What RL cannot recompute: a sample the guard read but did not trace, or a
resource the contract's block does not state (a demotion citing one is
not justified: its limits are unknown). It takes the trace's samples as the
telemetry the guard saw.

Each failing event is a bad prefix at that event. The bad locations are
not final: the request goes on, and a later violation is reported too.

Cost: O(1) per event and per sample (a cited reading is looked up among
those within the staleness bound); memory O(resources + samples within it).
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
from .replay import ResourceReplay, replays, why_not_firing

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
    return {
        "staleness": h.staleness,
        "dwell": h.dwell,
        "fresh": {},
        "n": {},
        "toggles": {},
        "last": {},
        "over": {},
        "replay": replays(h),
        "spec": h,
    }


def _sample(state: dict[str, Any], ev: Event) -> None:
    """A node event: a fresh sample (newer than every earlier one of its resource) is counted and
    replayed."""
    if isinstance(ev, Sample) and ev.sample_time > state["fresh"].get(ev.resource, -math.inf):
        state["fresh"][ev.resource] = ev.sample_time
        state["n"][ev.resource] = state["n"].get(ev.resource, 0) + 1
        table: dict[str, ResourceReplay] = state["replay"]
        replay = table.get(ev.resource)
        if replay is None:  # a resource the contract does not state: its sample times alone
            replay = table[ev.resource] = ResourceReplay(None, state["spec"])
        replay.observe(ev.value, ev.sample_time, ev.t, state["staleness"])


def _toggles(state: dict[str, Any], ev: Demote | Restore) -> int:
    """The resource's toggles with this event counted (if it toggles)."""
    last = state["last"].get(ev.resource)
    toggles = int(state["toggles"].get(ev.resource, 0))
    flips = last != "demote" if isinstance(ev, Demote) else last == "demote"
    return toggles + 1 if flips else toggles


def _citation(state: dict[str, Any], ev: Demote | Restore) -> list[str]:
    """What is wrong with the sample ``ev`` cites: not recorded, or stale."""
    res, cited = ev.resource, ev.sample_time
    freshest = state["fresh"].get(res)
    if freshest is None:
        return [f"no sample of {res!r} was recorded before the {ev.kind.value}"]
    if ev.t - cited > state["staleness"]:
        stale = "stale telemetry never restores" if isinstance(ev, Restore) else "too old to act on"
        return [f"the cited sample is {ev.t - cited:g} s old > staleness {state['staleness']:g} s ({stale})"]
    replay: ResourceReplay = state["replay"][res]  # a sample of it was recorded
    if replay.cited(cited) is None:
        return [f"the {ev.kind.value} cites a sample of {res!r} at {cited:g} that no recorded sample has"]
    return []


def _justification(state: dict[str, Any], ev: Demote | Restore) -> list[str]:
    """Whether the replayed redline supports ``ev`` (module doc); ``[]`` when it does."""
    table: dict[str, ResourceReplay] = state["replay"]
    replay = table.get(ev.resource)
    if isinstance(ev, Restore):
        firing = sorted(name for name, r in table.items() if r.firing)
        return [
            f"the redline still fires on {', '.join(map(repr, firing))} (a restore needs it clear)"
        ] * bool(firing)
    if replay is None or replay.limit is None:
        return [f"the contract states no redline for resource {ev.resource!r}: the demotion is unjustified"]
    reading = replay.cited(ev.sample_time)
    if reading is not None and not reading.firing:
        return [f"the cited sample does not justify a demotion: {why_not_firing(reading, replay.limit)}"]
    if not replay.firing:
        return [f"a later sample of {ev.resource!r} cleared the redline before the demotion"]
    return []


def _faults(state: dict[str, Any], ev: Demote | Restore) -> list[str]:
    """Every RL clause ``ev`` breaks (the protection clause aside), as the witness's detail says them."""
    why = _citation(state, ev)
    if not why or isinstance(ev, Restore):
        why += _justification(state, ev)
    res = ev.resource
    toggles, n = _toggles(state, ev), state["n"].get(res, 0)
    bound = toggle_bound(n, state["dwell"])
    if toggles > bound and not state["over"].get(res, False):
        why.append(f"{toggles} toggles of {res!r} in {n} fresh samples > 2⌈n/(dwell+1)⌉ = {bound}")
    return why


def _ok(inst: Instance, ev: Event) -> bool:
    """No clause broken; the faults are kept for the update that follows on the same event."""
    assert isinstance(ev, Demote | Restore)
    faults = _faults(inst.shared["RL"], ev)
    inst.vars["rl_judged"] = (ev, faults)
    return not faults


def _judged(inst: Instance, ev: Demote | Restore) -> list[str]:
    """`_faults` of ``ev``, as `_ok` found them just before (computed again if it did not run)."""
    kept = inst.vars.pop("rl_judged", None)
    return kept[1] if kept is not None and kept[0] is ev else _faults(inst.shared["RL"], ev)


def _account(inst: Instance, ev: Event) -> None:
    """Record what the event did and why it failed (for the witness), then count its toggle."""
    assert isinstance(ev, Demote | Restore)
    state = inst.shared["RL"]
    res = ev.resource
    toggles = _toggles(state, ev)
    replay: ResourceReplay | None = state["replay"].get(res)
    reading = None if replay is None else replay.cited(ev.sample_time)
    bound = toggle_bound(state["n"].get(res, 0), state["dwell"])
    inst.vars.update(
        rl_why=_judged(inst, ev),
        rl_resource=res,
        rl_freshest=state["fresh"].get(res),
        rl_toggles=toggles,
        rl_bound=bound,
        rl_samples=state["n"].get(res, 0),
        rl_staleness=state["staleness"],
        rl_sample_time=ev.sample_time,
        rl_smoothed=None if reading is None else reading.smoothed,
        rl_projected=None if reading is None else reading.projected,
        rl_h_min=None if replay is None or replay.limit is None else replay.limit.h_min,
    )
    state["toggles"][res] = toggles
    state["last"][res] = "demote" if isinstance(ev, Demote) else "restore"
    state["over"][res] = toggles > bound


def _detail(inst: Instance, ev: Event | None, now: float) -> str:
    v = inst.vars
    why = list(v["rl_why"])
    if v.get("rl_guarded"):
        why.insert(0, "a floor-entitled or assured request was demoted (only surplus work may be)")
    return "; ".join(why)


def _account_guarded(inst: Instance, ev: Event) -> None:
    """`_account` for a protected request's demotion (out of scope whatever its sample)."""
    _account(inst, ev)
    inst.vars["rl_guarded"] = True


def _account_restore(inst: Instance, ev: Event) -> None:
    """`_account` for a restore (a protected request's restore is judged as any other)."""
    _account(inst, ev)
    inst.vars["rl_guarded"] = False


_S, _G = (Loc.SURPLUS, Loc.SURPLUS_BAD), (Loc.GUARDED, Loc.GUARDED_BAD)
TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (Loc.NEW, K.ADMIT): (
        Edge(Loc.GUARDED, protected, "entitled or basis = floor"),
        Edge(Loc.SURPLUS, label="surplus"),
    ),
    **{
        (loc, K.DEMOTE): (
            Edge(
                Loc.SURPLUS,
                _ok,
                "a recorded, fresh, justifying sample; toggles within bound",
                update=_account,
            ),
            Edge(
                Loc.SURPLUS_BAD,
                label="unjustified, unrecorded or stale sample, or the toggle past the bound",
                update=_account,
                detail=_detail,
            ),
        )
        for loc in _S
    },
    **{(loc, K.DEMOTE): (Edge(Loc.GUARDED_BAD, update=_account_guarded, detail=_detail),) for loc in _G},
    **{
        (loc, K.RESTORE): (
            Edge(
                ok,
                _ok,
                "a recorded fresh sample, the redline clear, toggles within bound",
                update=_account_restore,
            ),
            Edge(
                bad,
                label="stale or unrecorded sample, the redline firing, or the toggle past the bound",
                update=_account_restore,
                detail=_detail,
            ),
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
        "smoothed": v["rl_smoothed"],
        "projected": v["rl_projected"],
        "h_min": v["rl_h_min"],
        "toggles": v["rl_toggles"],
        "fresh_samples": v["rl_samples"],
        "toggle_bound": v["rl_bound"],
    }


RL = TimedAutomaton(
    name="RL",
    description="every demotion cites a recorded fresh sample that fires the redline, only surplus work "
    "is demoted, restores on fresh samples with the redline clear, toggles ≤ 2⌈n/(dwell+1)⌉",
    locations=Loc,
    initial=Loc.NEW,
    bad=frozenset({Loc.SURPLUS_BAD, Loc.GUARDED_BAD}),
    transitions=TRANSITIONS,
    context=_context,
    shared=_shared,
    bad_is_final=False,
    node=_sample,
)
