"""A plain, independent checker for AF, SF, DR (DESIGN §3), RB (§10) and CAP (§4), from their sentences.

It shares no code with rvguard.monitors beyond the contract's window formula.
DESIGN §10's events change none of AF, SF and DR: a ``sample`` (no request)
only tells time, and a request's route, demotions, evictions and relocations
lie between its admission and its one terminal event. For RB an eviction
gives the slot back.

AF's upper side (DESIGN §11, §10's shared credits): the credit of the floor-basis admissions of a
tenant's requests that arrived in one contract window never exceeds B. CAP (DESIGN §4: "at most C in
flight"; §10: "per-engine in flight ≤ C_e"): at every dispatch, the requests holding a slot — and,
where routes or relocations name engines, those holding one on its engine — are at most C (C_e).
"""

from __future__ import annotations

from collections import defaultdict

from rvguard.contract import Contract, window_index
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Dispatch,
    Drop,
    Event,
    Evict,
    Fail,
    Reject,
    Relocate,
    Route,
    Sample,
    Watch,
)


def brute_force(events: list[Event], c: Contract) -> set[tuple[str, str, float]]:
    """(property, rid, t) of every violation in a well-formed trace."""
    arrivals = [e for e in events if isinstance(e, Arrive)]
    used: dict[tuple[str, int], float] = defaultdict(float)
    entitled: dict[str, bool] = {}
    deadline: dict[str, float] = {}
    lower: dict[str, float] = {}
    for a in arrivals:
        key = (a.tenant, window_index(a.t, c.epoch, c.window))
        used[key] += c.weight(a.prompt_tokens, a.max_tokens)
        floor = c.tenants[a.tenant].floor
        entitled[a.rid] = floor > 0 and used[key] <= floor
        deadline[a.rid] = a.deadline if a.deadline is not None else a.t + c.tenants[a.tenant].deadline
        cap = c.output_cap if a.max_tokens is None else min(a.max_tokens, c.output_cap)
        lower[a.rid] = c.service.lower.base + c.service.lower.per_token * cap
    last_t = events[-1].t if events else 0.0
    by_rid: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if not isinstance(e, Sample | Watch):  # a node event: it belongs to no request
            by_rid[e.rid].append(e)
    out = reserved_buffer(events, c.slots - c.reserve) | floor_spent(events, c) | capacity(events, c)
    for rid, evs in by_rid.items():
        d = deadline[rid]
        end = evs[-1] if isinstance(evs[-1], Reject | Complete | Drop | Fail) else None
        admit = next((e for e in evs if isinstance(e, Admit)), None)
        if entitled[rid] and isinstance(end, Reject):
            out.add(("AF", rid, end.t))
        if entitled[rid] and admit is not None and admit.basis is Basis.DEMOTED:
            out.add(("AF", rid, admit.t))  # DESIGN §12: demoted is the floor refused, as a reject is
        if isinstance(end, Drop) and not end.t + lower[rid] > d:
            out.add(("DR", rid, end.t))
        if not (entitled[rid] and admit is not None):
            continue
        if isinstance(end, Complete) and end.t <= d:
            continue
        if admit.t > d or (end is not None and end.t > d) or (end is None and last_t > d):
            out.add(("SF", rid, d))
        elif isinstance(end, Drop) or (isinstance(end, Fail) and not _blames_client(end.reason)):
            out.add(("SF", rid, end.t))
    return out


def doomed_dispatch(events: list[Event], c: Contract) -> set[tuple[str, str, float]]:
    """ND (DESIGN §3: "t + U(R) ≤ D(R) at dispatch"): each request's first dispatch at t with
    t + U(R) > D(R), U the contract's upper bound at the capped output length. Every dispatch counts,
    a relocated request's next one too (DESIGN §10: evict → relocate → dispatch); a request is
    reported once (the bad prefix is the first)."""
    assert c.service.upper is not None
    upper: dict[str, float] = {}
    deadline: dict[str, float] = {}
    out: dict[str, float] = {}
    for e in events:
        if isinstance(e, Arrive):
            cap = c.output_cap if e.max_tokens is None else min(e.max_tokens, c.output_cap)
            upper[e.rid] = c.service.upper.base + c.service.upper.per_token * cap
            deadline[e.rid] = e.deadline if e.deadline is not None else e.t + c.tenants[e.tenant].deadline
        elif isinstance(e, Dispatch) and e.rid not in out and e.t + upper[e.rid] > deadline[e.rid]:
            out[e.rid] = e.t
    return {("ND", rid, t) for rid, t in out.items()}


def reserved_buffer(events: list[Event], limit: int) -> set[tuple[str, str, float]]:
    """RB: at each dispatch of a request not admitted on the floor, count such requests holding a
    slot by then (it included): dispatched, and neither ended nor evicted since their last dispatch
    (DESIGN §10: an evicted request gives its slot back). More than ``limit`` = C − R violates.
    O(n²) on purpose."""
    surplus = {e.rid for e in events if isinstance(e, Admit) and e.basis is not Basis.FLOOR}
    out = set()
    for i, e in enumerate(events):
        if isinstance(e, Dispatch) and e.rid in surplus:
            holding: dict[str, bool] = {}
            for x in events[: i + 1]:
                if x.rid in surplus and isinstance(x, Dispatch):
                    holding[x.rid] = True
                elif isinstance(x, Complete | Fail | Drop | Evict):
                    holding[x.rid] = False
            if sum(holding.values()) > limit:
                out.add(("RB", e.rid, e.t))
    return out


def floor_spent(events: list[Event], c: Contract) -> set[tuple[str, str, float]]:
    """AF's upper side: at each floor admit, add up the credit of every floor admit so far (it
    included) of requests of its tenant that arrived in its window; more than B violates. O(n²)."""
    arrival = {e.rid: e for e in events if isinstance(e, Arrive)}

    def key(rid: str) -> tuple[str, int]:
        a = arrival[rid]
        return a.tenant, window_index(a.t, c.epoch, c.window)

    out = set()
    floor_admits = [e for e in events if isinstance(e, Admit) and e.basis is Basis.FLOOR]
    for i, e in enumerate(floor_admits):
        same = [x for x in floor_admits[: i + 1] if key(x.rid) == key(e.rid)]
        spent = sum(c.weight(arrival[x.rid].prompt_tokens, arrival[x.rid].max_tokens) for x in same)
        if spent > c.tenants[arrival[e.rid].tenant].floor:
            out.add(("AF", e.rid, e.t))
    return out


def capacity(events: list[Event], c: Contract) -> set[tuple[str, str, float]]:
    """CAP: replay the prefix up to each dispatch (and each late route) and count the holders.

    A request holds a slot from its dispatch until it ends or is evicted. Its engine is the one its
    last route or relocation named; it holds a slot of that engine from its dispatch (or from a route
    that comes while it runs holding none) until it ends or is evicted. An engine's C_e: the contract's
    fleet block's when it lists it, else the ``slots`` the last route naming it carried, else C."""
    out = set()
    for i, e in enumerate(events):
        if not isinstance(e, Dispatch | Route):
            continue
        holding, on_engine, _, carried = _replay(events[: i + 1])
        if isinstance(e, Dispatch) and sum(holding.values()) > c.slots:
            out.add(("CAP", e.rid, e.t))
            continue
        engine = on_engine.get(e.rid)
        if engine is None or (isinstance(e, Route) and not _took_at(events[:i], e.rid)):
            continue
        stated = c.fleet.engines.get(engine) if c.fleet is not None else None
        limit = stated if stated is not None else carried.get(engine, c.slots)
        if sum(1 for x in on_engine.values() if x == engine) > limit:
            out.add(("CAP", e.rid, e.t))
    return out


def _took_at(prefix: list[Event], rid: str) -> bool:
    """True when a route now makes ``rid`` take its engine's slot: it runs, holding no engine's slot."""
    holding, on_engine, _, _ = _replay(prefix)
    return holding.get(rid, False) and rid not in on_engine


def _replay(
    prefix: list[Event],
) -> tuple[dict[str, bool], dict[str, str], dict[str, str], dict[str, int]]:
    """Who holds a slot, who holds which engine's, each request's engine, each engine's carried slots."""
    holding: dict[str, bool] = {}
    on_engine: dict[str, str] = {}
    engine_of: dict[str, str] = {}
    carried: dict[str, int] = {}
    for x in prefix:
        if isinstance(x, Route | Relocate):
            slots = x.extra.get("slots") if isinstance(x, Route) else None
            if isinstance(slots, int) and not isinstance(slots, bool):
                carried[x.engine] = slots
            if isinstance(x, Route) and holding.get(x.rid) and x.rid in on_engine:
                continue  # running on its engine already: the route moves nothing
            engine_of[x.rid] = x.engine
            if isinstance(x, Route) and holding.get(x.rid):
                on_engine[x.rid] = x.engine  # a late route: the slot is taken now
        elif isinstance(x, Dispatch):
            holding[x.rid] = True
            if x.rid in engine_of:
                on_engine[x.rid] = engine_of[x.rid]
        elif isinstance(x, Evict | Complete | Fail | Drop):
            holding[x.rid] = False
            on_engine.pop(x.rid, None)
    return holding, on_engine, engine_of, carried


def _blames_client(reason: str) -> bool:
    """A fail the client caused (written out here, not imported: the oracle shares no code)."""
    return reason == "client-error" or reason.startswith("client-error:")
