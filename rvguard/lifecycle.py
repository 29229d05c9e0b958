"""The request lifecycle: the one table of stages and legal moves, and the event-kind codes.

Theory of operation
-------------------
Everything that says what may happen to a request lives here, once (h11's
``_state.py`` rule): the event kinds and their small-int codes, the stages a
request passes through, the legal ``(stage, kind) -> stage`` moves, and which
kinds end a request. Every other layer derives from this module:

* `rvguard.monitors.wf` builds the protocol automaton WF from `MOVES` (a
  missing pair is a WF violation);
* `rvguard.enforce.core` derives its ``TRANSITIONS`` from `MOVES` and the
  moves it emits (grouped by action), and checks at import that it names
  every move (one the core never emits is listed there with the reason);
* `rvguard.monitors.columns` generates the offline numpy tables (`NEXT`, the
  per-request row slots) from `MOVES`;
* event records (`rvguard.events`), columnar traces and the metrics index
  their tables by `CODE`.

Adding a kind or a stage is a change here (plus, for a kind, its record in
`rvguard.events`); the consumers' import-time checks name what else must
follow. The moves are DESIGN §2's protocol, with ``admit → fail`` added (a
queued request cancelled by its client or by shutdown ends without a false
doom-drop; see docs/design.md). ``dispatch → drop`` is legal (DESIGN §2: an
enforcer that stops a running request as doomed writes a well-formed trace,
and DR judges the drop), though the non-preemptive decision core never
emits it.

The runbook mechanisms of DESIGN §10 add kinds after the seven of §2 (codes
are positions, so the old codes stay):

* ``sample`` is a *node* kind (`NODE_KINDS`): a headroom reading of the
  engine, no rid, no move; it only carries time and telemetry.
* ``route`` is a self-loop before dispatch (the fleet picks an engine for an
  arrived or a queued request); its fields, not the stage, carry the choice.
  It may also come once a request is dispatched: a dispatch that waited for
  an engine's slot (while an engine was out of rotation) is routed late.
* ``demote`` holds a queued request back from dispatch (HELD) until
  ``restore`` queues it again; a held request may still end (drop, fail).
* ``evict`` takes a running request off its engine (EVICTED); ``relocate``
  queues it again (for another dispatch, on its new engine), or it ends with
  ``fail`` (reason ``preempted`` when it was stopped to shed load).

Each request still ends exactly once: the terminal kinds are unchanged.

The assumption watch (DESIGN §12) adds ``alert``, a second node kind: one of
the guard's preconditions stopped (or started again) holding; no rid, no move.
``stall`` is a second node kind: the Guard's event loop was late by ``lag`` seconds (a blocking
learner, sink or parse), recorded by the loop watchdog (`rvguard.enforce.stall`); no rid, no move.

This module is pure: it imports only `rvguard.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, StrEnum
from types import MappingProxyType
from typing import Final, TypeVar

from .errors import LifecycleError

__all__ = [
    "ADMIT",
    "ALERT",
    "ARRIVE",
    "CODE",
    "COMPLETE",
    "DEMOTE",
    "DISPATCH",
    "DROP",
    "EVICT",
    "FAIL",
    "FINAL",
    "INITIAL",
    "KINDS",
    "MOVES",
    "NEXT",
    "NODE_CODES",
    "NODE_KINDS",
    "N_KINDS",
    "REJECT",
    "RELOCATE",
    "RESTORE",
    "ROUTE",
    "SAMPLE",
    "STAGES",
    "STALL",
    "TERMINAL_CODES",
    "TERMINAL_KINDS",
    "EventKind",
    "Stage",
    "derive_moves",
    "describe",
]


class EventKind(StrEnum):
    """The event kinds of DESIGN §2, §10 and §12, in code order (a kind's code is its position)."""

    ARRIVE = "arrive"
    ADMIT = "admit"
    REJECT = "reject"
    DISPATCH = "dispatch"
    COMPLETE = "complete"
    DROP = "drop"
    FAIL = "fail"
    SAMPLE = "sample"
    ROUTE = "route"
    DEMOTE = "demote"
    RESTORE = "restore"
    EVICT = "evict"
    RELOCATE = "relocate"
    ALERT = "alert"
    STALL = "stall"


KINDS: tuple[EventKind, ...] = tuple(EventKind)
N_KINDS: Final = len(KINDS)
#: kind -> its small-int code: hot paths index flat tables by it instead of hashing an Enum
CODE: Mapping[EventKind, int] = MappingProxyType({k: i for i, k in enumerate(KINDS)})

ARRIVE: Final = CODE[EventKind.ARRIVE]
ADMIT: Final = CODE[EventKind.ADMIT]
REJECT: Final = CODE[EventKind.REJECT]
DISPATCH: Final = CODE[EventKind.DISPATCH]
COMPLETE: Final = CODE[EventKind.COMPLETE]
DROP: Final = CODE[EventKind.DROP]
FAIL: Final = CODE[EventKind.FAIL]
SAMPLE: Final = CODE[EventKind.SAMPLE]
ROUTE: Final = CODE[EventKind.ROUTE]
DEMOTE: Final = CODE[EventKind.DEMOTE]
RESTORE: Final = CODE[EventKind.RESTORE]
EVICT: Final = CODE[EventKind.EVICT]
RELOCATE: Final = CODE[EventKind.RELOCATE]
ALERT: Final = CODE[EventKind.ALERT]
STALL: Final = CODE[EventKind.STALL]

#: kinds that concern the node, not one request: no rid, in no move (they carry time and telemetry)
NODE_KINDS = frozenset({EventKind.SAMPLE, EventKind.ALERT, EventKind.STALL})
NODE_CODES = frozenset(CODE[k] for k in NODE_KINDS)


class Stage(Enum):
    """Where one request stands; each value is the sentence a protocol violation reports."""

    NEW = "new"
    ARRIVED = "arrived"
    ADMITTED = "admitted"
    HELD = "held"
    DISPATCHED = "dispatched"
    EVICTED = "evicted"
    DONE = "done"

    # members are singletons compared by identity: hash them so too, in C (Enum's own
    # __hash__ is Python code hashing the name, and the core looks a stage up per event)
    __hash__ = object.__hash__


_MEANING: Mapping[Stage, str] = MappingProxyType(
    {
        Stage.NEW: "the request never arrived",
        Stage.ARRIVED: "the request has arrived but was neither admitted nor rejected",
        Stage.ADMITTED: "the request is admitted but not dispatched",
        Stage.HELD: "the request is demoted: held back from dispatch until restored",
        Stage.DISPATCHED: "the request is in flight",
        Stage.EVICTED: "the request was evicted from its engine and is neither relocated nor ended",
        Stage.DONE: "the request already had its terminal event",
    }
)

STAGES: tuple[Stage, ...] = tuple(Stage)
INITIAL = Stage.NEW
#: stages after which the request is finished: its memory is freed, no event may follow
FINAL = frozenset({Stage.DONE})

_S, _K = Stage, EventKind
#: the legal moves: ``(stage, kind) -> next stage``; every pair not here is illegal
MOVES: Mapping[tuple[Stage, EventKind], Stage] = MappingProxyType(
    {
        (_S.NEW, _K.ARRIVE): _S.ARRIVED,
        (_S.ARRIVED, _K.ADMIT): _S.ADMITTED,
        (_S.ARRIVED, _K.REJECT): _S.DONE,
        (_S.ADMITTED, _K.DISPATCH): _S.DISPATCHED,
        (_S.ADMITTED, _K.DROP): _S.DONE,
        (_S.ADMITTED, _K.FAIL): _S.DONE,
        (_S.DISPATCHED, _K.COMPLETE): _S.DONE,
        (_S.DISPATCHED, _K.FAIL): _S.DONE,
        (_S.DISPATCHED, _K.DROP): _S.DONE,
        # DESIGN §10: routing, demotion, eviction and relocation
        (_S.ARRIVED, _K.ROUTE): _S.ARRIVED,
        (_S.ADMITTED, _K.ROUTE): _S.ADMITTED,
        (_S.DISPATCHED, _K.ROUTE): _S.DISPATCHED,
        (_S.ADMITTED, _K.DEMOTE): _S.HELD,
        (_S.HELD, _K.RESTORE): _S.ADMITTED,
        (_S.HELD, _K.DROP): _S.DONE,
        (_S.HELD, _K.FAIL): _S.DONE,
        (_S.DISPATCHED, _K.EVICT): _S.EVICTED,
        (_S.EVICTED, _K.RELOCATE): _S.ADMITTED,
        (_S.EVICTED, _K.FAIL): _S.DONE,
    }
)
del _S, _K

#: kinds that end a request (every move by one of them reaches a final stage)
TERMINAL_KINDS = frozenset(kind for (_, kind), nxt in MOVES.items() if nxt in FINAL)
TERMINAL_CODES = frozenset(CODE[k] for k in TERMINAL_KINDS)

#: `MOVES` as a flat int table: ``NEXT[stage_index * N_KINDS + code]`` is the next stage's index, -1 = illegal
NEXT: tuple[int, ...] = tuple(
    STAGES.index(MOVES[(s, k)]) if (s, k) in MOVES else -1 for s in STAGES for k in KINDS
)


A = TypeVar("A")
Move = tuple[Stage, EventKind]


def _show(moves: list[Move]) -> str:
    return ", ".join(f"{s.name} --{k.value}-->" for s, k in moves) or "none"


def derive_moves(
    actions: Mapping[A, frozenset[Move]], not_emitted: Mapping[Move, str], *, who: str
) -> Mapping[Move, tuple[Stage, A]]:
    """A consumer's table of the moves it emits, each with its next stage and the consumer's action.

    Every move must have exactly one action or one reason in ``not_emitted``
    (why that consumer never emits it), so a move added here is decided there.

    Raises:
        LifecycleError: naming every move the two disagree on: an action on a
            move the lifecycle lacks, a move with neither an action nor a
            reason in ``not_emitted``, or one with both (or two actions).
    """
    table = [(move, action) for action, moves in actions.items() for move in moves]
    emitted = [move for move, _ in table]
    illegal = [move for move in emitted if move not in MOVES]
    unknown = [move for move in MOVES if move not in emitted and move not in not_emitted]
    twice = [move for move in MOVES if emitted.count(move) + (move in not_emitted) > 1]
    if illegal or unknown or twice or any(move not in MOVES for move in not_emitted):
        raise LifecycleError(
            f"{who} disagrees with the lifecycle: actions on illegal moves: {_show(illegal)}; "
            f"moves with no action nor a NOT_EMITTED reason: {_show(unknown)}; "
            f"moves given twice: {_show(twice)}; NOT_EMITTED entries that are no move: "
            f"{_show([m for m in not_emitted if m not in MOVES])}"
        )
    return MappingProxyType({move: (MOVES[move], action) for move, action in table})


def describe(stage: Stage) -> str:
    """The sentence that says where a request stands (WF's violation detail uses it)."""
    return _MEANING[stage]


def _check() -> None:
    """Import-time consistency of the table: fail loudly on an edit that breaks it."""
    problems = [f"no meaning for stage {s.name}" for s in STAGES if s not in _MEANING]
    for (stage, kind), nxt in MOVES.items():
        if stage in FINAL:
            problems.append(f"move out of final stage {stage.name} by {kind.value}")
        if (nxt in FINAL) != (kind in TERMINAL_KINDS):
            problems.append(f"{kind.value} is terminal on some moves but not on {stage.name} -> {nxt.name}")
    reached = {INITIAL} | set(MOVES.values())
    problems += [f"stage {s.name} is unreachable" for s in STAGES if s not in reached]
    moved = {kind for (_, kind) in MOVES}
    problems += [f"node kind {k.value} has a move" for k in NODE_KINDS if k in moved]
    problems += [f"kind {k.value} has no move" for k in KINDS if k not in moved and k not in NODE_KINDS]
    if problems:
        raise LifecycleError("; ".join(problems))


_check()
