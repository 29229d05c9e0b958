"""A plain, independent checker for AF, SF, DR (DESIGN §3) and RB (§10), written from their sentences.

It shares no code with rvguard.monitors beyond the contract's window formula.
DESIGN §10's events change none of AF, SF and DR: a ``sample`` (no request)
only tells time, and a request's route, demotions, evictions and relocations
lie between its admission and its one terminal event. For RB an eviction
gives the slot back.
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
    out = reserved_buffer(events, c.slots - c.reserve)
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


def _blames_client(reason: str) -> bool:
    """A fail the client caused (written out here, not imported: the oracle shares no code)."""
    return reason == "client-error" or reason.startswith("client-error:")
