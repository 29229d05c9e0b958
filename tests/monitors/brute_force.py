"""A plain, independent checker for AF, SF and DR, written from DESIGN §3's sentences.

It shares no code with rvguard.monitors beyond the contract's window formula.
DESIGN §10's events change none of the three: a ``sample`` (no request) only
tells time, and a request's route, demotions, evictions and relocations lie
between its admission and its one terminal event.
"""

from __future__ import annotations

from collections import defaultdict

from rvguard.contract import Contract, window_index
from rvguard.events import Admit, Arrive, Complete, Drop, Event, Fail, Reject, Sample


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
        if not isinstance(e, Sample):  # a node event: it belongs to no request
            by_rid[e.rid].append(e)
    out: set[tuple[str, str, float]] = set()
    for rid, evs in by_rid.items():
        d = deadline[rid]
        end = evs[-1] if isinstance(evs[-1], Reject | Complete | Drop | Fail) else None
        admit = next((e for e in evs if isinstance(e, Admit)), None)
        if entitled[rid] and isinstance(end, Reject):
            out.add(("AF", rid, end.t))
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


def _blames_client(reason: str) -> bool:
    """A fail the client caused (written out here, not imported: the oracle shares no code)."""
    return reason == "client-error" or reason.startswith("client-error:")
