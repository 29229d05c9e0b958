"""The core's table: the redline's moves are the core's, each with its action; the rest have reasons."""

from __future__ import annotations

from rvguard.enforce.transitions import ACTIONS, EDGES, NOT_EMITTED, TRANSITIONS, Action
from rvguard.events import Demote, Fail, Restore
from rvguard.lifecycle import EventKind as K
from rvguard.lifecycle import Stage as S


def test_demote_restore_and_a_held_fail_are_the_cores() -> None:
    assert TRANSITIONS[(S.ADMITTED, K.DEMOTE)] == (S.HELD, Action.HOLD)
    assert TRANSITIONS[(S.HELD, K.RESTORE)] == (S.ADMITTED, Action.UNHOLD)
    assert TRANSITIONS[(S.HELD, K.FAIL)] == (S.DONE, Action.ABANDON)
    assert EDGES[S.ADMITTED][Demote] == (S.HELD, Action.HOLD)
    assert EDGES[S.HELD][Restore] == (S.ADMITTED, Action.UNHOLD) and EDGES[S.HELD][Fail][1] is Action.ABANDON


def test_what_the_core_never_emits_says_why() -> None:
    assert "restore" in NOT_EMITTED[(S.HELD, K.DROP)]  # doom-dropped only at dispatch, after its restore
    assert all(reason for reason in NOT_EMITTED.values())
    assert not {m for moves in ACTIONS.values() for m in moves} & set(NOT_EMITTED)
