"""The lifecycle table is the one definition: WF, the core and the offline arrays agree with it."""

from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest

from rvguard import lifecycle
from rvguard.columnar import ColumnarTrace
from rvguard.contract import contract_from_mapping
from rvguard.errors import LifecycleError
from rvguard.events import (
    EVENT_CLASSES,
    Arrive,
    Demote,
    Event,
    EventKind,
    Evict,
    Relocate,
    Restore,
    Route,
    Sample,
    Stall,
    Watch,
)
from rvguard.lifecycle import FINAL, INITIAL, KINDS, MOVES, Stage
from rvguard.monitors import Monitor, columns, wf
from rvguard.monitors.columns import protocol_is_clean, row_index
from rvguard.monitors.offline import check_offline

S, K = Stage, EventKind
Move = tuple[Stage, EventKind]
#: DESIGN §2's seven kinds, written out here (not read from the code under test)
DESIGN2 = (K.ARRIVE, K.ADMIT, K.REJECT, K.DISPATCH, K.COMPLETE, K.DROP, K.FAIL)


def _event(kind: EventKind, t: float, rid: str = "r") -> Event:
    if kind is K.ARRIVE:
        return Arrive(t, rid, "assured")
    if kind is K.SAMPLE:
        return Sample(t, "kv", 0.5, t)
    if kind is K.ALERT:
        return Watch(t, "service", 2.0, 1.0, t)
    if kind is K.STALL:
        return Stall(t, 0.5, t)
    if kind is K.ROUTE:
        return Route(t, rid, "e0", t)
    if kind in (K.DEMOTE, K.RESTORE):
        return (Demote if kind is K.DEMOTE else Restore)(t, rid, "kv", t)
    if kind is K.EVICT:
        return Evict(t, rid, 7, "emergency")
    if kind is K.RELOCATE:
        return Relocate(t, rid, "e1")
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
    """All 2801 sequences of DESIGN §2's kinds of length ≤ 4 for one request, judged by the offline arrays."""
    assert frozenset(DESIGN2) == columns.VECTORISED_KINDS
    for n in range(5):
        for word in itertools.product(DESIGN2, repeat=n):
            trace = ColumnarTrace.from_events([_event(k, float(i)) for i, k in enumerate(word)])
            assert protocol_is_clean(trace) == _legal(word), word


_TINY = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 1,
        "service": {"s_max": 1.0, "lower": 0.1},
        "tenants": {"assured": {"floor": 1, "deadline": 10.0}},
    }
)


def test_every_short_word_with_the_runbook_kinds_is_judged_by_replay() -> None:
    """Words of length ≤ 3 over all 14 kinds: a DESIGN §10 row sends the trace to replay,
    and the offline verdicts (WF included) are the online monitor's, the table's word or not."""
    for n in range(4):
        for word in itertools.product(KINDS, repeat=n):
            events = [_event(k, float(i)) for i, k in enumerate(word)]
            trace = ColumnarTrace.from_events(events)
            base = all(k in DESIGN2 for k in word)
            assert protocol_is_clean(trace) == (base and _legal(word)), word
            online = Monitor(_TINY, ("AF", "WF"), retain_finished=None)
            online.feed_all(events)
            wf_bad = [v for v in online.violations() if v.property == "WF"]
            # sample, alert and stall are node events: legal anywhere, so only the request's word counts
            assert (not wf_bad) == _legal(tuple(k for k in word if k not in (K.SAMPLE, K.ALERT, K.STALL))), (
                word
            )
            offline = check_offline(trace, _TINY, ("AF", "WF"))
            assert offline.vectorised == (base and _legal(word))
            assert [v.key for v in offline.violations] == [v.key for v in online.violations()], word


@pytest.mark.parametrize(
    ("word", "legal"),
    [
        # route is a self-loop before dispatch, at arrival or in the queue
        ("arrive route admit route dispatch complete", True),
        ("arrive admit dispatch route complete", True),  # a late route: its dispatch waited for a slot
        # a demoted queued request is held until restored, and may end while held
        ("arrive admit demote restore dispatch complete", True),
        ("arrive admit demote dispatch complete", False),
        ("arrive admit demote fail", True),
        ("arrive admit demote drop", True),
        ("arrive admit demote restore demote restore dispatch complete", True),
        ("arrive admit dispatch demote complete", False),
        # an evicted running request is relocated (queued, dispatched again) or ends with fail
        ("arrive admit dispatch evict relocate dispatch complete", True),
        ("arrive admit dispatch evict fail", True),
        ("arrive admit dispatch evict complete", False),
        ("arrive admit dispatch evict dispatch complete", False),
        ("arrive admit evict", False),
        ("arrive admit dispatch evict relocate dispatch evict relocate dispatch complete", True),
        # still exactly one terminal event
        ("arrive admit dispatch evict fail relocate", False),
        ("arrive admit dispatch complete evict", False),
    ],
)
def test_the_runbook_moves(word: str, legal: bool) -> None:
    """DESIGN §10's lifecycle, stated as words (an oracle written from the design, not the table)."""
    kinds = tuple(K(w) for w in word.split())
    assert _legal(kinds) == legal
    events = [_event(k, float(i)) for i, k in enumerate(kinds)]
    online = Monitor(_TINY, ("WF",))
    online.feed_all(events)
    assert (not online.violations()) == legal


def test_a_sample_is_a_node_event_with_no_move() -> None:
    assert {K.SAMPLE, K.ALERT, K.STALL} == lifecycle.NODE_KINDS
    assert not [m for m in MOVES if m[1] is K.SAMPLE]
    assert Sample(0.0, "kv", 1.0, 0.0).rid == ""


def test_two_interleaved_requests_are_judged_each_on_its_own() -> None:
    words = [w for n in range(4) for w in itertools.product(DESIGN2, repeat=n)]
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
    runbook = {m for m in MOVES if m[1] not in DESIGN2 or S.HELD in m or S.EVICTED in m}
    redline = {(S.ADMITTED, K.DEMOTE), (S.HELD, K.RESTORE), (S.HELD, K.FAIL)}  # the core's own (demotion)
    relief = {(S.DISPATCHED, K.EVICT), (S.EVICTED, K.FAIL)}  # the core's own too (relief)
    assert set(NOT_EMITTED) == {(S.DISPATCHED, K.DROP)} | (runbook - redline - relief)
    assert all(NOT_EMITTED.values())  # each with its reason
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
    with pytest.raises(LifecycleError, match="reason: DISPATCHED --drop-->, ARRIVED --route-->, "):
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
    names += ("SAMPLE", "ROUTE", "DEMOTE", "RESTORE", "EVICT", "RELOCATE")
    assert [lifecycle.CODE[K[n]] for n in names] == list(range(13))  # appended: old codes stay
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
    layout = columns._row_columns(frozenset(DESIGN2))
    assert layout is not None
    column, n = layout
    assert n == 4 and len({column[lifecycle.CODE[k]] for k in lifecycle.TERMINAL_KINDS}) == 1
    assert all(column[lifecycle.CODE[k]] == -1 for k in KINDS if k not in DESIGN2)
    base = {m: nxt for m, nxt in MOVES.items() if m[1] in DESIGN2}
    for (_, kind), nxt in base.items():
        for (stage, later), _ in base.items():
            if stage is nxt:
                assert column[lifecycle.CODE[later]] > column[lifecycle.CODE[kind]]


def test_a_cyclic_lifecycle_is_not_vectorised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind that may repeat cannot have one column: the offline path must replay instead."""
    assert columns._row_columns() is None  # relocation makes dispatch repeat, route loops
    cyclic = {**MOVES, (S.DISPATCHED, K.ADMIT): S.ADMITTED}
    monkeypatch.setattr(columns, "MOVES", MappingProxyType(cyclic))
    assert columns._row_columns(frozenset(DESIGN2)) is None
    assert columns._vectorised_kinds() == {K.ARRIVE, K.ADMIT, K.REJECT}  # the prefix stops at the cycle


def test_the_enforce_harness_protocol_is_the_table() -> None:
    """tests/enforce/_harness.py states WF by hand from DESIGN §2 and §10: it must say the same."""
    from tests.enforce._harness import _PROTOCOL

    name = {S.NEW: "new", S.ARRIVED: "arrived", S.ADMITTED: "queued", S.HELD: "held"}
    name |= {S.DISPATCHED: "running", S.EVICTED: "evicted", S.DONE: "done"}
    assert set(name) == set(Stage)
    hand = {(s, k.value): n for s, moves in _PROTOCOL.items() for k_, n in moves.items() for k in [K(k_)]}
    assert hand == {(name[s], k.value): name[n] for (s, k), n in MOVES.items()}
