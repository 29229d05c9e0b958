"""WF — the well-formedness protocol of DESIGN §2, as a strict automaton built from the lifecycle.

Theory of operation
-------------------
WF is `rvguard.lifecycle` read as a timed automaton: its locations are the
lifecycle's stages plus BAD, its edges the lifecycle's moves, one unguarded
edge each. Per request: ``arrive → admit → dispatch → (complete | fail |
drop)``, or ``arrive → reject``, or ``admit → drop`` (deferred drop at
dispatch time), or ``admit → fail`` (the request was cancelled or the guard
shut down before it reached a slot; an extension of DESIGN §2 so that such
requests still get exactly one terminal event without a false doom-drop).
Anything else — an event for a request that never arrived, a second
``arrive``, any event after the terminal one — is missing from the table and
so goes BAD.

Rejection is atomic: the monitor reports the violation and leaves every
automaton's state as it was before the illegal event (the event is refused,
as an h11 connection refuses an illegal event). Out-of-order timestamps are
not a WF verdict but a `TraceOrderError`: monitors learn time from events.
"""

from __future__ import annotations

from enum import Enum

from ..events import Event, EventKind
from ..lifecycle import FINAL as FINAL
from ..lifecycle import INITIAL, MOVES, STAGES, Stage, describe
from .automaton import Edge, Instance, TimedAutomaton

__all__ = ["FINAL", "TRANSITIONS", "WF", "Loc", "illegal_detail"]

#: WF's protocol locations are the lifecycle's stages (BAD is added below)
Loc = Stage


class _Bad(Enum):
    BAD = "bad"


BAD = _Bad.BAD

TRANSITIONS: dict[tuple[Enum, EventKind], tuple[Edge, ...]] = {
    (stage, kind): (Edge(nxt),) for (stage, kind), nxt in MOVES.items()
}


def illegal_detail(loc: Stage, ev: Event) -> str:
    """The sentence reported for an event the protocol does not allow."""
    if ev.kind is EventKind.ARRIVE and loc is not INITIAL:
        return f"duplicate arrive for rid {ev.rid!r}"
    return f"{ev.kind.value} not allowed: {describe(loc)}"


def _strict_detail(inst: Instance, ev: Event | None, now: float) -> str:  # pragma: no cover - see Monitor
    return "" if ev is None else f"{ev.kind.value} not allowed here"


WF = TimedAutomaton(
    name="WF",
    description="well-formed request protocol (DESIGN §2)",
    locations=(*STAGES, BAD),
    initial=INITIAL,
    bad=frozenset({BAD}),
    transitions=TRANSITIONS,
    strict=True,
    strict_detail=_strict_detail,
)
