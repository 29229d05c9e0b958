"""A tiny discrete-event driver for the decision core and a brute-force checker.

The driver replays arrivals against the core with given service times (a
heap of completions; completions before arrivals at equal times), so tests
can produce whole traces. The checker is an independent, offline statement
of AF, SF, DR and WF over a finished trace, written from DESIGN §3 directly
(it shares only `contract.Entitlement` with the core, on purpose: DESIGN §1
makes entitlement one definition for every layer). WF is written out here
too, DESIGN §2's protocol and §10's moves, not read from `rvguard.lifecycle`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rvguard.contract import Contract, Entitlement
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Event, Fail, Proposal, Reject

#: WF as DESIGN §2 and §10 state it: the kinds a request may take from each stage, and where to
_PROTOCOL: dict[str, dict[str, str]] = {
    "new": {"arrive": "arrived"},
    "arrived": {"admit": "queued", "reject": "done", "route": "arrived"},
    "queued": {"dispatch": "running", "drop": "done", "fail": "done", "route": "queued", "demote": "held"},
    "held": {"restore": "queued", "drop": "done", "fail": "done"},
    "running": {"complete": "done", "fail": "done", "drop": "done", "evict": "evicted", "route": "running"},
    "evicted": {"relocate": "queued", "fail": "done"},
    "done": {},
}

_YES = Proposal()


@dataclass(frozen=True)
class Arrival:
    t: float
    tenant: str
    service: float
    proposal: Proposal = _YES
    max_tokens: int | None = None
    prompt_tokens: int | None = None


def drive(
    core: DecisionCore,
    arrivals: Sequence[Arrival],
    *,
    check: bool = True,
    on_step: Callable[[DecisionCore, list[Event]], None] | None = None,
) -> list[Event]:
    """Run arrivals to completion through ``core``; return the trace."""
    trace: list[Event] = []
    done: list[tuple[float, int, str]] = []
    service: dict[str, float] = {}
    seq = 0

    def take(events: list[Event]) -> None:
        nonlocal seq
        for ev in events:
            if isinstance(ev, Dispatch):
                seq += 1
                heapq.heappush(done, (ev.t + service[ev.rid], seq, ev.rid))
        trace.extend(events)
        if check:
            core._check()
        if on_step is not None:
            on_step(core, events)

    order = sorted(range(len(arrivals)), key=lambda i: (arrivals[i].t, i))
    i = 0
    while i < len(order) or done:
        if done and (i >= len(order) or done[0][0] <= arrivals[order[i]].t):
            t, _, rid = heapq.heappop(done)
            take(core.finish(rid, t))
            continue
        a = arrivals[order[i]]
        rid = f"r{order[i]}"
        service[rid] = a.service
        req = Request(rid, a.tenant, a.t, prompt_tokens=a.prompt_tokens, max_tokens=a.max_tokens)
        take(core.arrive(req, a.proposal, a.t))
        i += 1
    return trace


def by_rid(trace: Iterable[Event]) -> dict[str, list[Event]]:
    out: dict[str, list[Event]] = {}
    for ev in trace:
        out.setdefault(ev.rid, []).append(ev)
    return out


def check_wf(trace: Sequence[Event]) -> list[str]:
    """WF by brute force: each rid's kinds walk the lifecycle's moves, time never goes back."""
    bad = [f"time {b.t} < {a.t}" for a, b in itertools.pairwise(trace) if b.t < a.t]
    for rid, evs in by_rid(trace).items():
        if rid == "":  # node events (samples): no request, always legal
            continue
        stage = "new"
        for ev in evs:
            nxt = _PROTOCOL[stage].get(ev.kind.value)
            if nxt is None:
                bad.append(f"{rid}: {ev.kind.value} in stage {stage}")
                break
            stage = nxt
    return bad


def entitled_rids(contract: Contract, trace: Sequence[Event]) -> set[str]:
    ent = Entitlement(contract)
    out = set()
    for ev in trace:
        if isinstance(ev, Arrive):
            w = contract.weight_units(ev.prompt_tokens, ev.max_tokens, ent.units)
            if ent.arrive(ev.tenant, ev.t, w)[1]:
                out.add(ev.rid)
    return out


def check_af(contract: Contract, trace: Sequence[Event]) -> list[str]:
    """AF: every entitled request's decision is an admit (basis floor)."""
    per = by_rid(trace)
    bad = []
    for rid in entitled_rids(contract, trace):
        evs = per[rid]
        if len(evs) < 2 or not isinstance(evs[1], Admit) or evs[1].basis is not Basis.FLOOR:
            bad.append(f"{rid}: {evs[1:2]}")
    return bad


def check_dr(contract: Contract, trace: Sequence[Event]) -> list[str]:
    """DR: a drop at t only when t + L(R) > D(R)."""
    arrive = {ev.rid: ev for ev in trace if isinstance(ev, Arrive)}
    bad = []
    for ev in trace:
        if isinstance(ev, Drop):
            a = arrive[ev.rid]
            assert a.deadline is not None
            if not ev.t + contract.lower_bound(a.max_tokens) > a.deadline:
                bad.append(f"{ev.rid}: drop at {ev.t} not doomed")
    return bad


def sf_misses(contract: Contract, trace: Sequence[Event]) -> list[str]:
    """SF: entitled and admitted requests complete by their deadline."""
    per = by_rid(trace)
    bad = []
    for rid in entitled_rids(contract, trace):
        evs = per[rid]
        a = evs[0]
        assert isinstance(a, Arrive)
        assert a.deadline is not None
        if not any(isinstance(e, Admit) for e in evs):
            continue
        last = evs[-1]
        if not isinstance(last, Complete) or last.t > a.deadline:
            bad.append(f"{rid}: {last.kind.value} at {last.t} vs deadline {a.deadline}")
    return bad


def check_rb(contract: Contract, trace: Sequence[Event]) -> list[str]:
    """RB by brute force: after every event, count the requests admitted on a basis other than
    ``floor`` that have a dispatch and no terminal event yet; more than C − R is a violation."""
    bad = []
    limit = contract.slots - contract.reserve
    for i, ev in enumerate(trace):
        prefix = trace[: i + 1]
        surplus = {e.rid for e in prefix if isinstance(e, Admit) and e.basis is not Basis.FLOOR}
        started = {e.rid for e in prefix if isinstance(e, Dispatch)}
        ended = {e.rid for e in prefix if isinstance(e, Complete | Fail | Drop | Reject)}
        holding = (surplus & started) - ended
        if len(holding) > limit:
            bad.append(f"after event {i} ({ev.kind.value} {ev.rid}): {sorted(holding)} > C - R = {limit}")
    return bad


#: the outcome a caller sees for its request's terminal event (README, "The enforcer"), written
#: here apart from the Guard's own table
STATUS_OF = {"complete": "completed", "reject": "rejected", "drop": "dropped", "fail": "failed"}


def terminal_counts(trace: Sequence[Event]) -> dict[str, int]:
    out: dict[str, int] = {}
    for ev in trace:
        if isinstance(ev, Reject | Complete | Drop | Fail):
            out[ev.rid] = out.get(ev.rid, 0) + 1
    return out


def make_contract(
    *,
    slots: int = 2,
    floor: float = 2,
    deadline: float = 1.5,
    window: float = 1.0,
    s_max: float = 0.5,
    s_max_opp: float | None = None,
    lower: float = 0.1,
    upper: float | None = None,
    excess: str = "reject",
    credit: str = "count",
    output_cap: int = 48,
    reserve: int = 0,
) -> Contract:
    """A two-tenant contract (assured tier 0, opp tier 1) for tests."""
    return Contract.model_validate(
        {
            "epoch": 0.0,
            "window": window,
            "slots": slots,
            "reserve": reserve,
            "output_cap": output_cap,
            "excess": excess,
            "credit": credit,
            "service": {"s_max": s_max, "s_max_opp": s_max_opp, "lower": lower, "upper": upper},
            "tenants": {
                "assured": {"floor": floor, "deadline": deadline, "tier": 0},
                "opp": {"floor": 0, "deadline": deadline, "tier": 1},
            },
        }
    )
