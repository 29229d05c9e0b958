"""The lifecycle table is the one definition: WF, the core and the offline arrays agree with it."""

from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest

from rvguard import lifecycle
from rvguard.columnar import ColumnarTrace
from rvguard.errors import LifecycleError
from rvguard.events import EVENT_CLASSES, Arrive, Event, EventKind
from rvguard.lifecycle import FINAL, INITIAL, KINDS, MOVES, Stage
from rvguard.monitors import columns, wf
from rvguard.monitors.columns import protocol_is_clean, row_index

S, K = Stage, EventKind
Move = tuple[Stage, EventKind]


def _event(kind: EventKind, t: float, rid: str = "r") -> Event:
    if kind is K.ARRIVE:
        return Arrive(t, rid, "assured")
    return EVENT_CLASSES[kind](t, rid)  # type: ignore[call-arg]


def _legal(word: tuple[EventKind, ...]) -> bool:
    """A word is legal when it walks the table from the initial stage."""
    stage = INITIAL
    for kind in word:
        nxt = MOVES.get((stage, kind))
        if nxt is None:
            return False
        stage = nxt
    return True


def test_every_short_word_is_clean_offline_exactly_when_the_table_allows_it() -> None:
    """All 2801 kind sequences of length ≤ 4 for one request, judged by the offline arrays."""
    for n in range(5):
        for word in itertools.product(KINDS, repeat=n):
            trace = ColumnarTrace.from_events([_event(k, float(i)) for i, k in enumerate(word)])
            assert protocol_is_clean(trace) == _legal(word), word


def test_two_interleaved_requests_are_judged_each_on_its_own() -> None:
    words = [w for n in range(4) for w in itertools.product(KINDS, repeat=n)]
    for a, b in itertools.product(words[:60], repeat=2):
        events = [_event(k, 0.0, "a") for k in a] + [_event(k, 0.0, "b") for k in b]
        trace = ColumnarTrace.from_events(events)
        assert row_index(trace).clean == (_legal(a) and _legal(b)), (a, b)


def test_wf_is_the_table() -> None:
    assert set(wf.TRANSITIONS) == set(MOVES)
    for move, edges in wf.TRANSITIONS.items():
        [edge] = edges
        assert edge.target is MOVES[move] and edge.guard is None
    assert wf.WF.initial is INITIAL and set(wf.FINAL) == set(FINAL)


def test_the_core_emits_every_move_but_the_ones_it_names() -> None:
    from rvguard.enforce.core import NOT_EMITTED, TRANSITIONS

    assert set(TRANSITIONS) | set(NOT_EMITTED) == set(MOVES)
    assert not set(TRANSITIONS) & set(NOT_EMITTED)
    assert set(NOT_EMITTED) == {(S.DISPATCHED, K.DROP)}
    for move, (nxt, _action) in TRANSITIONS.items():
        assert nxt is MOVES[move]


def test_a_core_table_that_disagrees_fails_naming_the_moves() -> None:
    from rvguard.enforce.core import ACTIONS, NOT_EMITTED, Action, derive_transitions

    def edited(action: Action, moves: set[Move]) -> dict[Action, frozenset[Move]]:
        return {**ACTIONS, action: frozenset(moves)}

    with pytest.raises(LifecycleError, match="no action nor a NOT_EMITTED reason: ADMITTED --fail-->;"):
        derive_transitions(edited(Action.DEQUEUE, {(S.ADMITTED, K.DROP)}), NOT_EMITTED)
    with pytest.raises(LifecycleError, match="actions on illegal moves: DONE --arrive-->;"):
        derive_transitions(edited(Action.RECORD, {(S.NEW, K.ARRIVE), (S.DONE, K.ARRIVE)}), NOT_EMITTED)
    released = {(S.DISPATCHED, K.COMPLETE), (S.DISPATCHED, K.FAIL), (S.DISPATCHED, K.DROP)}
    with pytest.raises(LifecycleError, match="moves given twice: DISPATCHED --drop-->;"):
        derive_transitions(edited(Action.RELEASE, released), NOT_EMITTED)
    with pytest.raises(LifecycleError, match=r"no move: DONE --fail-->$"):
        derive_transitions(ACTIONS, {**NOT_EMITTED, (S.DONE, K.FAIL): "never"})
    with pytest.raises(LifecycleError, match="reason: DISPATCHED --drop-->;"):
        derive_transitions(ACTIONS, {})


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({(S.DONE, K.ARRIVE): S.ARRIVED}, "move out of final stage DONE"),
        ({(S.ARRIVED, K.COMPLETE): S.ADMITTED}, "complete is terminal on some moves but not"),
    ],
)
def test_an_inconsistent_table_fails_at_import(
    monkeypatch: pytest.MonkeyPatch, edit: dict[tuple[Stage, EventKind], Stage], message: str
) -> None:
    monkeypatch.setattr(lifecycle, "MOVES", MappingProxyType({**MOVES, **edit}))
    with pytest.raises(LifecycleError, match=message):
        lifecycle._check()


def test_an_unreachable_stage_fails_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    moves = {m: n for m, n in MOVES.items() if n is not S.DISPATCHED}
    monkeypatch.setattr(lifecycle, "MOVES", MappingProxyType(moves))
    with pytest.raises(LifecycleError, match="stage DISPATCHED is unreachable"):
        lifecycle._check()


def test_named_codes_are_the_kinds_positions() -> None:
    names = ("ARRIVE", "ADMIT", "REJECT", "DISPATCH", "COMPLETE", "DROP", "FAIL")
    assert [getattr(lifecycle, n) for n in names] == [lifecycle.CODE[K[n]] for n in names]
    assert list(lifecycle.CODE.values()) == list(range(lifecycle.N_KINDS))
    assert all(cls.code == lifecycle.CODE[kind] and cls.kind is kind for kind, cls in EVENT_CLASSES.items())
    assert {K.REJECT, K.COMPLETE, K.DROP, K.FAIL} == lifecycle.TERMINAL_KINDS


def test_the_flat_table_is_the_moves() -> None:
    for (i, stage), (code, kind) in itertools.product(enumerate(lifecycle.STAGES), enumerate(KINDS)):
        nxt = lifecycle.NEXT[i * lifecycle.N_KINDS + code]
        assert (nxt < 0) == ((stage, kind) not in MOVES)
        if nxt >= 0:
            assert lifecycle.STAGES[nxt] is MOVES[(stage, kind)]


def test_the_offline_row_columns_follow_the_moves() -> None:
    layout = columns._row_columns()
    assert layout is not None
    column, n = layout
    assert n == 4 and len({column[lifecycle.CODE[k]] for k in lifecycle.TERMINAL_KINDS}) == 1
    for (_, kind), nxt in MOVES.items():
        for (stage, later), _ in MOVES.items():
            if stage is nxt:
                assert column[lifecycle.CODE[later]] > column[lifecycle.CODE[kind]]


def test_a_cyclic_lifecycle_is_not_vectorised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind that may repeat cannot have one column: the offline path must replay instead."""
    cyclic = {**MOVES, (S.DISPATCHED, K.ADMIT): S.ADMITTED}
    monkeypatch.setattr(columns, "MOVES", MappingProxyType(cyclic))
    assert columns._row_columns() is None
