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

This module is pure: it imports only `rvguard.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, StrEnum
from types import MappingProxyType

from .errors import LifecycleError

__all__ = [
    "ADMIT",
    "ARRIVE",
    "CODE",
    "COMPLETE",
    "DISPATCH",
    "DROP",
    "FAIL",
    "FINAL",
    "INITIAL",
    "KINDS",
    "MOVES",
    "NEXT",
    "N_KINDS",
    "REJECT",
    "STAGES",
    "TERMINAL_CODES",
    "TERMINAL_KINDS",
    "EventKind",
    "Stage",
    "describe",
]


class EventKind(StrEnum):
    """The event kinds of DESIGN §2, in code order (a kind's code is its position)."""

    ARRIVE = "arrive"
    ADMIT = "admit"
    REJECT = "reject"
    DISPATCH = "dispatch"
    COMPLETE = "complete"
    DROP = "drop"
    FAIL = "fail"


KINDS: tuple[EventKind, ...] = tuple(EventKind)
N_KINDS = len(KINDS)
#: kind -> its small-int code: hot paths index flat tables by it instead of hashing an Enum
CODE: Mapping[EventKind, int] = MappingProxyType({k: i for i, k in enumerate(KINDS)})

ARRIVE = CODE[EventKind.ARRIVE]
ADMIT = CODE[EventKind.ADMIT]
REJECT = CODE[EventKind.REJECT]
DISPATCH = CODE[EventKind.DISPATCH]
COMPLETE = CODE[EventKind.COMPLETE]
DROP = CODE[EventKind.DROP]
FAIL = CODE[EventKind.FAIL]


class Stage(Enum):
    """Where one request stands; each value is the sentence a protocol violation reports."""

    NEW = "new"
    ARRIVED = "arrived"
    ADMITTED = "admitted"
    DISPATCHED = "dispatched"
    DONE = "done"

    # members are singletons compared by identity: hash them so too, in C (Enum's own
    # __hash__ is Python code hashing the name, and the core looks a stage up per event)
    __hash__ = object.__hash__


_MEANING: Mapping[Stage, str] = MappingProxyType(
    {
        Stage.NEW: "the request never arrived",
        Stage.ARRIVED: "the request has arrived but was neither admitted nor rejected",
        Stage.ADMITTED: "the request is admitted but not dispatched",
        Stage.DISPATCHED: "the request is in flight",
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
    if problems:
        raise LifecycleError("; ".join(problems))


_check()
