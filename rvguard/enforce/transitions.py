"""The decision core's automaton as a table: which lifecycle moves it emits, and what each does.

Theory of operation
-------------------
Each live request in `rvguard.enforce.core.DecisionCore` is one instance of this automaton. Its
states are the lifecycle's stages (`rvguard.lifecycle.Stage`) and its edges the lifecycle's moves
(`rvguard.lifecycle.MOVES`), each paired with the `Action` its change of stage takes on the
core's shared state (`ACTIONS`). A move the core never emits is listed in `NOT_EMITTED` with the
reason. `derive_transitions` checks at import that the two lists and the lifecycle agree — every
move has exactly one action or one reason, no action names a move the lifecycle lacks — and
fails naming each disagreement, so a stage or kind added to the lifecycle is decided here too.

The redline's moves (DESIGN §10): ``demote`` takes a queued surplus request out of the ready
queue (HOLD), ``restore`` puts it back (UNHOLD), and a held request may still end with ``fail``
(cancelled, shutdown: ABANDON). A held request is never doom-dropped while held (DR drops at
dispatch time, after its restore). Eviction (`rvguard.enforce.relief`) takes a running request to
EVICTED, where it keeps its slot until ``fail`` (preempted) ends it (RELEASE); relocating it and
routing are the fleet layer's, not one engine's core.

Pure: imports the lifecycle and the event records only.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final

from ..events import EVENT_CLASSES, EventKind
from ..lifecycle import Stage, derive_moves

__all__ = ["ACTIONS", "EDGES", "NOT_EMITTED", "TRANSITIONS", "Action", "Move", "derive_transitions"]


class Action(Enum):
    """What an edge does to the core's shared state."""

    RECORD = "record"  # remember the request
    ENQUEUE = "enqueue"  # into the ready queue
    FORGET = "forget"  # rejected: drop all memory of it
    TAKE_SLOT = "take_slot"  # queued → one of the C slots
    DEQUEUE = "dequeue"  # leaves the queue without a slot (drop, fail)
    RELEASE = "release"  # frees its slot
    HOLD = "hold"  # the redline takes a queued surplus request out of the ready queue
    UNHOLD = "unhold"  # the redline cleared: back into the ready queue
    ABANDON = "abandon"  # a held request ends (cancelled, shutdown)
    EVICT = "evict"  # a running request taken off its engine: it keeps its slot until it ends


Move = tuple[Stage, EventKind]
S, K = Stage, EventKind
#: the lifecycle moves the core emits, grouped by what each does to the core's shared state
ACTIONS: Mapping[Action, frozenset[Move]] = MappingProxyType(
    {
        Action.RECORD: frozenset({(S.NEW, K.ARRIVE)}),
        Action.ENQUEUE: frozenset({(S.ARRIVED, K.ADMIT)}),
        Action.FORGET: frozenset({(S.ARRIVED, K.REJECT)}),
        Action.TAKE_SLOT: frozenset({(S.ADMITTED, K.DISPATCH)}),
        Action.DEQUEUE: frozenset({(S.ADMITTED, K.DROP), (S.ADMITTED, K.FAIL)}),
        Action.RELEASE: frozenset({(S.DISPATCHED, K.COMPLETE), (S.DISPATCHED, K.FAIL), (S.EVICTED, K.FAIL)}),
        Action.HOLD: frozenset({(S.ADMITTED, K.DEMOTE)}),
        Action.UNHOLD: frozenset({(S.HELD, K.RESTORE)}),
        Action.ABANDON: frozenset({(S.HELD, K.FAIL)}),
        Action.EVICT: frozenset({(S.DISPATCHED, K.EVICT)}),
    }
)
_RELOCATED = "relocation resumes an evicted request on another engine: the fleet layer's, not one core's"
_ROUTED = "routing between engines is the fleet layer's; one core guards one engine"
#: lifecycle moves the core never emits, and why
NOT_EMITTED: Mapping[Move, str] = MappingProxyType(
    {
        (
            S.DISPATCHED,
            K.DROP,
        ): "non-preemptive: a running request is never dropped (DR drops at dispatch time)",
        (S.HELD, K.DROP): "a held request is doom-dropped only at dispatch time, after its restore",
        (S.ARRIVED, K.ROUTE): _ROUTED,
        (S.ADMITTED, K.ROUTE): _ROUTED,
        (S.DISPATCHED, K.ROUTE): _ROUTED,
        (S.EVICTED, K.RELOCATE): _RELOCATED,
    }
)
del S, K


def derive_transitions(
    actions: Mapping[Action, frozenset[Move]], not_emitted: Mapping[Move, str]
) -> Mapping[Move, tuple[Stage, Action]]:
    """The lifecycle's moves that the core emits, each with its next stage and action.

    Raises:
        LifecycleError: naming every move the two disagree on (`lifecycle.derive_moves`).
    """
    return derive_moves(actions, not_emitted, who="enforce.core")


TRANSITIONS: Mapping[Move, tuple[Stage, Action]] = derive_transitions(ACTIONS, NOT_EMITTED)

#: the same table indexed for the hot path: per state, by event class (C-level hashing)
EDGES: Final[dict[Stage, dict[type, tuple[Stage, Action]]]] = {s: {} for s in Stage}
for (_state, _kind), _edge in TRANSITIONS.items():
    EDGES[_state][EVENT_CLASSES[_kind]] = _edge
