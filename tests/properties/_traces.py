"""Trace generators for the table tests: WF-breaking mutations of the shared strategy, and a fast
seeded generator for batch loops (the protocol written out here from DESIGN §2 and §10, not read from
rvguard.lifecycle)."""

from __future__ import annotations

import random

from hypothesis import strategies as st

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
    event_from_dict,
    event_to_dict,
)
from tests.monitors.strategies import wellformed_traces

#: kinds that may follow each kind of a live request
_NEXT = {
    "arrive": ["admit", "admit", "reject"],
    "admit": ["dispatch", "dispatch", "dispatch", "drop", "fail"],
    "dispatch": ["complete", "complete", "fail", "drop", "evict"],
    "evict": ["relocate", "fail"],
    "relocate": ["dispatch", "drop", "fail"],
}
_TERMINAL = {"reject", "complete", "fail", "drop"}
_ODD = ["arrive", "admit", "reject", "dispatch", "complete", "drop", "fail", "evict", "relocate"]


def _make(kind: str, t: float, rid: str, rng: random.Random) -> Event:
    if kind == "admit":
        return Admit(t, rid, rng.choice(list(Basis)))
    if kind == "reject":
        return Reject(t, rid, "r")
    if kind == "dispatch":
        return Dispatch(t, rid)
    if kind == "complete":
        return Complete(t, rid)
    if kind == "drop":
        return Drop(t, rid, "doomed")
    if kind == "fail":
        return Fail(t, rid, rng.choice(["err", "preempted"]))
    if kind == "evict":
        return Evict(t, rid, 0, "emergency")
    if kind == "relocate":
        return Relocate(t, rid, "e0")
    return Arrive(t, rid, rng.choice(["a", "b", "o"]), max_tokens=rng.choice([None, 2, 12]), prompt_tokens=3)


def random_trace(rng: random.Random, steps: int = 40, odd: float = 0.03) -> list[Event]:
    """A random trace, mostly well-formed; with probability ``odd`` per step an event that breaks the
    protocol (any kind for any rid seen so far, or one never seen)."""
    t, n, out = 0.0, 0, []
    live: dict[str, str] = {}
    for _ in range(rng.randint(1, steps)):
        t += rng.choice([0.0, 0.0, 0.125, 0.25, 0.5, 1.0, 0.3])
        if rng.random() < odd:
            rid = rng.choice([f"r{i}" for i in range(n + 1)])
            out.append(_make(rng.choice(_ODD), t, rid, rng))
            continue
        if not live or rng.random() < 0.4:
            rid, n = f"r{n}", n + 1
            ev = _make("arrive", t, rid, rng)
            if rng.random() < 0.5:
                ev = Arrive(t, rid, ev.tenant, deadline=t + rng.choice([0.25, 0.5, 1.0, 2.0]), max_tokens=4)  # type: ignore[attr-defined]
            out.append(ev)
            live[rid] = "arrive"
            continue
        rid = rng.choice(sorted(live))
        kind = rng.choice(_NEXT[live[rid]])
        out.append(_make(kind, t, rid, rng))
        if kind in _TERMINAL:
            del live[rid]
        else:
            live[rid] = kind
    return out


@st.composite
def mutated_traces(draw: st.DrawFn) -> list[Event]:
    """A shared-strategy trace (runbook kinds too) with up to three request events copied to a later
    place (at the time there, never earlier than the original), some under a rid never seen: repeats,
    events after an end and events of no request break WF."""
    trace = draw(wellformed_traces(runbook=True))
    for _ in range(draw(st.integers(0, 3))):
        picks = [i for i, e in enumerate(trace) if e.rid]
        if not picks:
            break
        i = draw(st.sampled_from(picks))
        j = draw(st.integers(i + 1, len(trace)))
        rec = event_to_dict(trace[i]) | {"t": trace[j - 1].t}
        if draw(st.integers(0, 4)) == 0:
            rec["rid"] = "ghost"
        if rec.get("deadline") is not None:
            rec["deadline"] = max(rec["deadline"], rec["t"])
        trace = [*trace[:j], event_from_dict(rec), *trace[j:]]
    return trace
