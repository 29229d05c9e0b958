"""Hypothesis strategies: random well-formed traces over a small contract."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from rvguard.contract import Contract, contract_from_mapping
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Drop,
    Event,
    Evict,
    Fail,
    Reject,
    Relocate,
    Restore,
    Route,
    RouteMode,
    Sample,
)

# Steps that land exactly on window edges (W = 1) and on deadlines are common on purpose.
STEPS = st.sampled_from([0.0, 0.0, 0.125, 0.25, 0.5, 1.0, 0.3, 1.5])


#: the DESIGN §10 blocks of a small contract: short staleness, k = 1, two small engines
RUNBOOK_BLOCKS = {
    "headroom": {
        "staleness": 0.5,
        "dwell": 1,
        "resources": {"kv": {"h_min": 0.2, "hard_floor": 0.125}, "seqs": {"h_min": 0.1}},
    },
    "eviction": {"k": 1},
    "fleet": {"staleness": 0.25, "engines": {"e0": 1, "e1": 2}},
}


def small_contract(
    credit: str = "count",
    epoch: float = 0.0,
    reserve: int = 0,
    *,
    runbook: bool = True,
    eviction: dict[str, Any] | None = None,
) -> Contract:
    """The test contract; ``runbook``: with the DESIGN §10 blocks (`RUNBOOK_BLOCKS`), ``eviction``
    replacing theirs."""
    return contract_from_mapping(
        {
            "epoch": epoch,  # an origin off 0 moves every window edge away from the steps' grid
            "window": 1.0,
            "slots": 2,
            "reserve": reserve,
            "output_cap": 8,
            "credit": credit,
            "service": {"s_max": 0.5, "lower": {"base": 0.25, "per_token": 0.0625}, "upper": 1.0},
            "tenants": {
                "a": {"floor": 2 if credit == "count" else 12, "deadline": 1.0, "tier": 0},
                "b": {"floor": 1 if credit == "count" else 6, "deadline": 0.5, "tier": 1},
                "o": {"floor": 0, "deadline": 2.0, "tier": 2},
            },
            **(RUNBOOK_BLOCKS if runbook else {}),
            **({"eviction": eviction} if runbook and eviction is not None else {}),
        }
    )


#: DESIGN §2's protocol, written out here (not read from rvguard.lifecycle): the kinds that may
#: follow each kind of a live request; completions weighted up on purpose
_NEXT = {
    "arrive": ["admit", "reject"],
    "admit": ["dispatch", "drop", "fail"],
    "dispatch": ["complete", "complete", "drop", "fail"],
}
#: DESIGN §10 added: a route before dispatch (or a late one after it), demote → restore (held
#: meanwhile, may end), evict → relocate (queued again) or fail; ``relocate`` and ``restore`` queue
#: the request as ``admit`` did
_NEXT_RUNBOOK = {
    "arrive": ["admit", "reject", "route"],
    "admit": ["dispatch", "dispatch", "drop", "fail", "route", "demote"],
    "demote": ["restore", "restore", "drop", "fail"],
    "restore": ["dispatch", "drop", "fail", "route", "demote"],
    "dispatch": ["complete", "complete", "drop", "fail", "evict", "route"],
    "evict": ["relocate", "relocate", "fail"],
    "relocate": ["dispatch", "drop", "fail", "route", "demote"],
}


#: fail reasons: a service failure, a client error (SF exempts it), the guard's own ends (PR judges
#: them), a caller's cancel and the engine's time-out (neither is the guard's)
FAIL_REASONS = ("err", "client-error: http 400", "preempted", "shutdown", "cancelled", "timeout")
RESOURCES = ("kv", "seqs")
ENGINES = ("e0", "e1")


def _event(kind: str, t: float, rid: str, basis: Basis = Basis.SURPLUS, reason: str = "err") -> Event:
    if kind == "admit":
        return Admit(t, rid, basis)
    if kind == "reject":
        return Reject(t, rid, "r")
    if kind == "dispatch":
        return Dispatch(t, rid)
    if kind == "complete":
        return Complete(t, rid)
    if kind == "drop":
        return Drop(t, rid, "doomed")
    return Fail(t, rid, reason)


def _runbook_event(draw: st.DrawFn, kind: str, t: float, rid: str, freshest: dict[str, float]) -> Event:
    """A DESIGN §10 event of a request, its fields drawn (times at or before ``t``); a demotion or
    restore cites the freshest sample of its resource (``freshest``) more often than not."""
    back = draw(st.sampled_from([0.0, 0.0, 0.125, 0.5, 2.0]))
    if kind == "route":
        mode = draw(st.sampled_from(list(RouteMode)))
        view = None if mode is RouteMode.SILOED and draw(st.booleans()) else max(0.0, t - back)
        engine = draw(st.sampled_from(ENGINES))
        # what a p2c route compared: often both engines' headroom (ties too), sometimes nothing
        heads = st.sampled_from([0.0, 0.25, 0.5])
        sampled = draw(st.sampled_from([None, "both", "both", "one"]))
        extra: dict[str, object] = {}
        if mode is RouteMode.P2C and sampled is not None:
            chosen = ENGINES if sampled == "both" else [engine]
            extra["sampled"] = {e: draw(heads) for e in chosen}
        if draw(st.integers(0, 2)) == 0:
            extra["slots"] = draw(st.sampled_from([1, 2]))  # C_e, at times
        return Route(t, rid, engine, view, mode, extra=extra)
    if kind in ("demote", "restore"):
        cls = Demote if kind == "demote" else Restore
        # mostly the resource sampled last (what a redline acting on a reading cites)
        known = list(freshest)[-1:] if freshest and draw(st.integers(0, 3)) else list(RESOURCES)
        resource = draw(st.sampled_from(known))
        cited = freshest.get(resource)
        if cited is None or draw(st.integers(0, 2)) == 0:
            cited = max(0.0, t - back)
        return cls(t, rid, resource, cited)
    if kind == "evict":
        return _evict(draw, t, rid)
    return Relocate(t, rid, draw(st.sampled_from(ENGINES)))


def _evict(draw: st.DrawFn, t: float, rid: str, smoothed: dict[str, float] | None = None) -> Evict:
    """An eviction, often with what a channel decided it on: values on a binary grid, and the decimal
    tie of the credited-headroom rule (headroom 0.29, 10 of 1000 tokens credited, target 0.3, which
    binary floats get wrong); sometimes the plan's relief time and the node's deadline. ``smoothed``:
    each resource's Ĥ over the samples drawn so far, which the recorded headroom mostly is (what a
    channel acting on the traced telemetry records)."""
    state = draw(st.sampled_from([0, 1, 4, 8, 10, 16, 40, 4096]))
    reason = draw(st.sampled_from(["emergency", "emergency", "voluntary", ""]))
    if not draw(st.integers(0, 3)):
        return Evict(t, rid, state, reason)
    relief = draw(
        st.sampled_from(
            [{}, {}, {"lands_at": t + 0.5, "deadline": t + 1.0}, {"lands_at": t + 1.0, "deadline": t + 0.5}]
        )
    )
    resource = draw(st.sampled_from([*RESOURCES, None]))
    grid = [0.0, 0.1, 0.125, 0.25, 0.29, 0.5, 0.75, None]
    if smoothed and resource in smoothed and draw(st.integers(0, 3)):
        grid = [smoothed[resource]]
    return Evict(
        t,
        rid,
        state,
        reason,
        resource=resource,
        headroom=draw(st.sampled_from(grid)),
        target=draw(st.sampled_from([0.25, 0.3, 0.5, 1.0, None])),
        capacity=draw(st.sampled_from([16, 64, 1000, None])),
        extra=relief,
    )


def _sample(draw: st.DrawFn, t: float) -> Sample:
    back = draw(st.sampled_from([0.0, 0.0, 0.125, 1.0]))
    value = draw(st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.9, 1.0]))
    return Sample(t, draw(st.sampled_from(RESOURCES)), value, max(0.0, t - back))


@st.composite
def wellformed_traces(draw: st.DrawFn, max_steps: int = 40, *, runbook: bool = False) -> list[Event]:
    """A WF-clean trace: arrivals and protocol steps interleaved, time non-decreasing.

    ``runbook``: DESIGN §10's kinds too (routes, demote/restore, evict/relocate, node samples).
    """
    table = _NEXT_RUNBOOK if runbook else _NEXT
    freshest: dict[str, float] = {}
    tenants: dict[str, str] = {}
    t = 0.0
    events: list[Event] = []
    live: dict[str, str] = {}
    n = 0
    for _ in range(draw(st.integers(1, max_steps))):
        t += draw(STEPS)
        if runbook and draw(st.integers(0, 5)) == 0:
            sample = _sample(draw, t)
            events.append(sample)
            newest = max(freshest.pop(sample.resource, sample.sample_time), sample.sample_time)
            freshest[sample.resource] = newest  # (re-inserted last: the resource sampled last)
            continue
        if not live or draw(st.booleans()):
            rid = f"r{n}"
            n += 1
            tenant = draw(st.sampled_from(["a", "a", "b", "o"]))
            deadline = draw(
                st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.0]).map(lambda d, t0=t: t0 + d))
            )
            max_tokens = draw(st.one_of(st.none(), st.integers(0, 12)))
            events.append(Arrive(t, rid, tenant, deadline=deadline, max_tokens=max_tokens, prompt_tokens=3))
            live[rid] = "arrive"
            tenants[rid] = tenant
            continue
        rid = draw(st.sampled_from(sorted(live)))
        kind = draw(st.sampled_from(table[live[rid]]))
        if kind in ("demote", "evict") and tenants[rid] != "o" and draw(st.integers(0, 3)):
            kind = "dispatch" if kind == "demote" else "complete"  # mostly surplus work is shed
        if kind == "demote" and draw(st.booleans()):  # the redline acts on a sample just read
            sample = Sample(t, draw(st.sampled_from(RESOURCES)), 0.05, t)
            events.append(sample)
            freshest.pop(sample.resource, None)  # (re-inserted last: the resource sampled last)
            freshest[sample.resource] = t
        if kind in ("route", "demote", "restore", "evict", "relocate"):
            events.append(_runbook_event(draw, kind, t, rid, freshest))
            if kind != "route":  # a self-loop: the request stays where it was
                live[rid] = kind
            continue
        basis = draw(st.sampled_from(list(Basis))) if kind == "admit" else Basis.SURPLUS
        if runbook and kind == "admit" and tenants[rid] == "o" and draw(st.integers(0, 3)):
            basis = Basis.SURPLUS  # mostly surplus work, which the runbook's mechanisms may shed
        reason = draw(st.sampled_from(FAIL_REASONS)) if kind == "fail" else "err"
        events.append(_event(kind, t, rid, basis, reason))
        if kind in ("complete", "fail", "drop", "reject"):
            del live[rid]
        else:
            live[rid] = kind
    return events


@st.composite
def eviction_traces(draw: st.DrawFn, max_steps: int = 30) -> list[Event]:
    """A WF-clean trace dense in evictions (EV's ground): requests arrive and run at once; samples
    (stale ones too), evictions of running requests (`_evict`, mostly recording the samples' Ĥ),
    and evicted requests ending ``preempted`` or relocated and running again, interleaved."""
    t, n, events = 0.0, 0, []
    running: list[str] = []
    evicted: list[str] = []
    smoothed: dict[str, float] = {}
    newest: dict[str, float] = {}
    ops = ["arrive", "arrive", "sample", "sample", "evict", "evict", "evict", "end", "relocate"]
    for _ in range(draw(st.integers(1, max_steps))):
        t += draw(st.sampled_from([0.0, 0.0, 0.125, 0.5]))
        op = draw(st.sampled_from(ops))
        if op == "arrive":
            rid, n = f"r{n}", n + 1
            tenant = draw(st.sampled_from(["o", "o", "o", "a"]))
            basis = Basis.FLOOR if tenant == "a" and draw(st.booleans()) else Basis.SURPLUS
            events += [Arrive(t, rid, tenant), Admit(t, rid, basis), Dispatch(t, rid)]
            running.append(rid)
        elif op == "sample":
            sample = _sample(draw, t)
            events.append(sample)
            if sample.sample_time > newest.get(sample.resource, -1.0):  # fresh: Ĥ moves (EWMA, α 0.3)
                newest[sample.resource] = sample.sample_time
                last = smoothed.get(sample.resource)
                smoothed[sample.resource] = sample.value if last is None else 0.3 * sample.value + 0.7 * last
        elif op == "evict" and running:
            rid = running.pop(draw(st.integers(0, len(running) - 1)))
            events.append(_evict(draw, t, rid, smoothed))
            evicted.append(rid)
        elif op in ("end", "relocate") and evicted:
            rid = evicted.pop(draw(st.integers(0, len(evicted) - 1)))
            if op == "end":
                events.append(Fail(t, rid, "preempted"))
            else:
                events += [Relocate(t, rid, draw(st.sampled_from(ENGINES))), Dispatch(t, rid)]
                running.append(rid)
    return events


def within_floor(events: list[Event], contract: Contract) -> list[Event]:
    """The trace with each floor admission that would spend its (tenant, arrival window) beyond B
    admitted as surplus instead: a trace that keeps AF's upper side (what the guard writes)."""
    units = contract.credit_units()
    arrivals = {e.rid: e for e in events if isinstance(e, Arrive)}
    spent: dict[tuple[str, int], int] = {}
    out = []
    for e in events:
        if isinstance(e, Admit) and e.basis is Basis.FLOOR:
            a = arrivals[e.rid]
            key = (a.tenant, contract.window_index(a.t))
            w = contract.weight_units(a.prompt_tokens, a.max_tokens, units)
            if spent.get(key, 0) + w > units.floors[a.tenant]:
                e = dataclasses.replace(e, basis=Basis.SURPLUS)
            else:
                spent[key] = spent.get(key, 0) + w
        out.append(e)
    return out
