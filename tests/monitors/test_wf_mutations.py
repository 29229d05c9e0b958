"""WF fails on every protocol break: a compliant trace (hypothesis's well-formed traces, DESIGN §10's
kinds included), one more request driven to a stage by legal moves, then one event of a kind that
stage does not allow; WF reports it at that event, online and offline, and refuses it atomically.

Clause audit — WF's clauses are the protocol of DESIGN §2, extended in §10, written out here from
the design's text (`LEGAL`, not read from rvguard.lifecycle); every (stage, kind) pair outside it
is one clause, and each has its test (`test_wf_reports_each_illegal_event`, one case per pair):

* NEW (never arrived): anything but ``arrive`` — an event for a request that never arrived;
* ARRIVED: anything but ``admit``, ``reject``, ``route`` — e.g. a dispatch before admission, a
  second ``arrive`` (a duplicate arrive, at every stage but NEW);
* ADMITTED: anything but ``dispatch``, ``drop``, ``fail``, ``route``, ``demote``;
* HELD (demoted): anything but ``restore``, ``drop``, ``fail`` — a held request is never dispatched;
* DISPATCHED: anything but ``complete``, ``fail``, ``drop``, ``route``, ``evict``;
* EVICTED: anything but ``relocate``, ``fail`` — evict → relocate → dispatch;
* DONE (after its terminal event): anything — at most one terminal event.

Each legal move is accepted (`test_every_legal_move_is_accepted`), so the table is WF's exactly.
Out-of-order timestamps are not a WF verdict (a `TraceOrderError`), and are not mutated here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings

from rvguard.columnar import ColumnarTrace
from rvguard.events import (
    Admit,
    Arrive,
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
)
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline

from .strategies import small_contract, wellformed_traces

C = small_contract()
RID = "mutant"

#: one event of each request kind, for ``RID`` at ``t``
MAKE: dict[str, Callable[[float], Event]] = {
    "arrive": lambda t: Arrive(t, RID, "o"),
    "admit": lambda t: Admit(t, RID),
    "reject": lambda t: Reject(t, RID, "excess"),
    "dispatch": lambda t: Dispatch(t, RID),
    "complete": lambda t: Complete(t, RID),
    "drop": lambda t: Drop(t, RID, "doomed"),
    "fail": lambda t: Fail(t, RID, "backend"),
    "route": lambda t: Route(t, RID, "e0", t),
    "demote": lambda t: Demote(t, RID, "kv", t),
    "restore": lambda t: Restore(t, RID, "kv", t),
    "evict": lambda t: Evict(t, RID, 8),
    "relocate": lambda t: Relocate(t, RID, "e1"),
}

#: DESIGN §2 and §10: the kinds each stage allows, and a legal path that reaches the stage
LEGAL: dict[str, set[str]] = {
    "new": {"arrive"},
    "arrived": {"admit", "reject", "route"},
    "admitted": {"dispatch", "drop", "fail", "route", "demote"},
    "held": {"restore", "drop", "fail"},
    "dispatched": {"complete", "fail", "drop", "route", "evict"},
    "evicted": {"relocate", "fail"},
    "done": set(),
}
PATH: dict[str, list[str]] = {
    "new": [],
    "arrived": ["arrive"],
    "admitted": ["arrive", "admit"],
    "held": ["arrive", "admit", "demote"],
    "dispatched": ["arrive", "admit", "dispatch"],
    "evicted": ["arrive", "admit", "dispatch", "evict"],
    "done": ["arrive", "reject"],
}
ILLEGAL = [(stage, kind) for stage in LEGAL for kind in MAKE if kind not in LEGAL[stage]]
MOVES = [(stage, kind) for stage in LEGAL for kind in sorted(LEGAL[stage])]


def _extended(base: list[Event], stage: str, kind: str) -> tuple[list[Event], Event]:
    t = base[-1].t if base else 0.0
    edited = MAKE[kind](t)
    return [*base, *(MAKE[k](t) for k in PATH[stage]), edited], edited


def _wf(events: list[Event]) -> list[tuple[str, str, float, str]]:
    online = Monitor(C, ("WF",))
    online.feed_all(events)
    offline = check_offline(ColumnarTrace.from_events(events), C, ("WF",))
    found = [(v.property, v.rid, v.t, v.detail) for v in online.violations()]
    assert [(v.property, v.rid, v.t, v.detail) for v in offline.violations] == found
    return found


@pytest.mark.parametrize(("stage", "kind"), ILLEGAL)
@settings(max_examples=5, deadline=None)
@given(base=wellformed_traces(runbook=True, max_steps=25))
def test_wf_reports_each_illegal_event(stage: str, kind: str, base: list[Event]) -> None:
    mutant, edited = _extended(base, stage, kind)
    [(prop, rid, t, detail)] = _wf(mutant)
    assert (prop, rid, t) == ("WF", RID, edited.t)
    expected = "duplicate arrive" if kind == "arrive" else f"{kind} not allowed"
    assert detail.startswith(expected)
    # refused atomically: the request is still at its stage, so a legal move from there is accepted
    if LEGAL[stage]:
        assert _wf([*mutant, MAKE[sorted(LEGAL[stage])[0]](edited.t)]) == [(prop, rid, t, detail)]


@pytest.mark.parametrize(("stage", "kind"), MOVES)
def test_every_legal_move_is_accepted(stage: str, kind: str) -> None:
    mutant, _ = _extended([], stage, kind)
    assert _wf(mutant) == []
