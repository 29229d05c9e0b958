"""The product-state engine agrees with the tables read one automaton at a time.

`Interpreter` below steps each `TimedAutomaton` straight from its
``transitions`` dict (enum keys, no compilation, no product, no cache): the
reference the monitor's fused, cached transitions must reproduce, for the
built-in properties and for user-defined ones (guards, updates, timers,
strict automata), on well-formed traces and on traces with protocol breaks.
"""

from __future__ import annotations

import heapq
import itertools
from enum import Enum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from examples.custom_property import QUEUE_WAIT
from rvguard.contract import Contract, Entitlement
from rvguard.events import Admit, Arrive, Basis, Event, EventKind
from rvguard.lifecycle import CODE
from rvguard.monitors import Instance, Monitor, TimedAutomaton, wf
from rvguard.monitors.monitor import BUILTIN
from rvguard.monitors.product import (
    CHOICE,
    ILLEGAL,
    SLOW,
    UNKNOWN,
    Product,
    fixed_move,
    gated_move,
    guarded_move,
)

from .strategies import small_contract, wellformed_traces
from .test_automaton import STRICT, TIMED

CONTRACT = small_contract("count")
AUTOS: list[TimedAutomaton] = [BUILTIN[n] for n in ("AF", "SF", "DR", "ND", "RB", "CAP")]
AUTOS += [TIMED, STRICT, QUEUE_WAIT]

Key = tuple[str, str, float, str]


class Interpreter:
    """Reference engine: per request, a dict automaton -> location, stepped from the raw tables."""

    def __init__(self, contract: Contract, autos: list[TimedAutomaton]) -> None:
        self.contract = contract
        self.autos = autos
        self.ent = Entitlement(contract)
        self.live: dict[str, tuple[Instance, dict[str, Enum], wf.Loc]] = {}
        self.finished: set[str] = set()
        self.timers: list[tuple[float, int, str, str, Enum]] = []
        self.seq = itertools.count()
        self.found: list[Key] = []
        #: the variables each automaton's instances share (AF's floor credit, RB's and CAP's counts)
        self.shared = {a.name: a.shared(contract) for a in autos if a.shared is not None}

    def feed(self, ev: Event) -> None:
        self._fire(ev.t)
        entry = self.live.get(ev.rid)
        loc = entry[2] if entry else (wf.Loc.DONE if ev.rid in self.finished else wf.Loc.NEW)
        edges = wf.TRANSITIONS.get((loc, ev.kind))
        if not edges:
            self.found.append(("WF", ev.rid, ev.t, wf.illegal_detail(loc, ev)))
            return
        if entry is None:
            assert isinstance(ev, Arrive)
            entry = (self._instance(ev), {a.name: a.initial for a in self.autos}, loc)
        inst, locs, _ = entry
        inst.events.append(ev)
        for auto in self.autos:
            self._step(auto, inst, locs, ev)
        new_wf = wf.Loc(edges[0].target)
        self.live[ev.rid] = (inst, locs, new_wf)
        if new_wf is wf.Loc.DONE:
            del self.live[ev.rid]
            self.finished.add(ev.rid)

    def _instance(self, ev: Arrive) -> Instance:
        c = self.contract
        tenant = c.tenants[ev.tenant]
        weight = c.weight(ev.prompt_tokens, ev.max_tokens)
        window, entitled, rank, used = self.ent.arrive(
            ev.tenant, ev.t, c.weight_units(ev.prompt_tokens, ev.max_tokens)
        )
        deadline = ev.t + tenant.deadline if ev.deadline is None else ev.deadline
        lower, upper = c.lower_bound(ev.max_tokens), c.upper_bound(ev.max_tokens)
        inst = Instance(
            ev.rid,
            ev.tenant,
            ev.t,
            deadline,
            lower,
            upper,
            tenant.floor > 0,
            weight,
            window,
            entitled,
            rank,
            used,
        )
        inst.shared = self.shared
        return inst

    def _step(self, auto: TimedAutomaton, inst: Instance, locs: dict[str, Enum], ev: Event) -> None:
        loc = locs[auto.name]
        if loc in auto.bad and auto.bad_is_final:
            return
        edges = auto.transitions.get((loc, ev.kind))
        if edges is None:
            if auto.strict:
                locs[auto.name] = next(iter(auto.bad))
                detail = auto.strict_detail(inst, ev, ev.t) if auto.strict_detail else ""
                self.found.append((auto.name, inst.rid, ev.t, detail or f"{ev.kind.value} not allowed"))
            return
        for edge in edges:
            if edge.guard is None or edge.guard(inst, ev):
                if edge.update is not None:
                    edge.update(inst, ev)
                self._enter(
                    auto,
                    inst,
                    locs,
                    edge.target,
                    ev.t,
                    edge.detail(inst, ev, ev.t) if edge.detail else edge.label,
                )
                return

    def _enter(
        self, auto: TimedAutomaton, inst: Instance, locs: dict[str, Enum], target: Enum, t: float, detail: str
    ) -> None:
        locs[auto.name] = target
        if target in auto.bad:
            self.found.append((auto.name, inst.rid, t, detail))
            return
        for timer in auto.timers:
            if timer.location is target:
                bound = timer.bound(inst)
                if bound < self.now:
                    self._take(auto, inst, locs, timer.target, bound, timer)
                    return
                heapq.heappush(self.timers, (bound, next(self.seq), inst.rid, auto.name, target))

    def _take(self, auto, inst, locs, target, bound, timer) -> None:  # type: ignore[no-untyped-def]
        detail = timer.detail(inst, None, bound) if timer.detail else timer.label
        self._enter(auto, inst, locs, target, bound, detail)

    now = float("-inf")

    def _fire(self, t: float) -> None:
        while self.timers and self.timers[0][0] < t:
            bound, _, rid, name, source = heapq.heappop(self.timers)
            entry = self.live.get(rid)
            auto = next(a for a in self.autos if a.name == name)
            if entry is None or entry[1][name] is not source:
                continue
            for timer in auto.timers:
                if timer.location is source and timer.bound(entry[0]) == bound:
                    self._take(auto, entry[0], entry[1], timer.target, bound, timer)
                    break
        self.now = t


def _keys(m: Monitor) -> list[Key]:
    return sorted((v.property, v.rid, v.t, v.detail) for v in m.violations())


def _check(events: list[Event], autos: list[TimedAutomaton]) -> None:
    monitor = Monitor(CONTRACT, [*autos, "WF"])
    ref = Interpreter(CONTRACT, autos)
    for ev in events:
        monitor.feed(ev)
        ref.feed(ev)
    assert _keys(monitor) == sorted(ref.found)


def _broken(events: list[Event], picks: list[int]) -> list[Event]:
    """Repeat some events: duplicates and events after a terminal one break the protocol."""
    out = list(events)
    for p in picks:
        if out:
            i = p % len(out)
            out.insert(i + 1, out[i])
    return out


@settings(max_examples=200, deadline=None)
@given(
    wellformed_traces(),
    st.lists(st.integers(0, 100), max_size=3),
    st.sets(st.sampled_from(range(len(AUTOS))), min_size=1),
)
def test_monitor_matches_the_table_interpreter(
    events: list[Event], picks: list[int], chosen: set[int]
) -> None:
    autos = [AUTOS[i] for i in sorted(chosen)]
    _check(_broken(events, picks), autos)


def _expected_choice(
    comps: list[Any], locs: tuple[int, ...], code: int, moves: list[int | None]
) -> tuple[list[Any], list[Any], list[tuple[int, int]]] | None:
    """What the product should make of a move, from the tables: None when some automaton must be
    stepped (slow); else the guarded automata's edges, the gates, and the gated edges' targets."""
    guarded, gates, gated_targets = [], [], []
    for pos, (c, loc, m) in enumerate(zip(comps, locs[1:], moves, strict=True), start=1):
        if m is not None:
            continue
        edges = guarded_move(c, loc, code)
        if edges is None:
            gated = gated_move(c, loc, code)
            if gated is None:
                return None
            gates.append(gated[0])
            edges = gated[1]
            gated_targets += [(pos, e[0]) for e in c.table[loc * len(EventKind) + code]]
            if len(edges) == 1 and edges[0][0] is None:  # fixed once the gate fails
                continue
        guarded.append(edges)
    return guarded, gates, gated_targets


def test_a_gated_admission_is_decided_fast_unless_it_is_on_the_floor() -> None:
    """AF's upper side gates the ``admit`` of a request not entitled (tenant o, B = 0: most of the
    volume): a surplus admission is decided without stepping (a product state), a floor admission
    goes to the slow path (`SLOW`), where the upper side counts it. (An entitled request's admit is
    stepped: AF's demoted clause has no gate, and such admissions are on the floor anyway.)"""
    wf_c = wf.WF.compile()
    wf_next = [-1 if e is None else e[0][0] for e in wf_c.table]
    product = Product(wf_next, wf_c.index[wf.Loc.NEW], wf_c.index[wf.Loc.DONE], [BUILTIN["AF"].compile()])
    mon = Monitor(CONTRACT, ("AF",))
    for rid, tenant in (("q", "o"),):
        arrive = Arrive(0.0, rid, tenant)
        mon.feed(arrive)
        inst = mon._live[rid]
        after = product.resolve(0, CODE[EventKind.ARRIVE])
        state = after if after >= 0 else product.choices[CHOICE - after].decide(inst, arrive)
        entry = product.next[state * len(EventKind) + CODE[EventKind.ADMIT]]
        entry = product.resolve(state, CODE[EventKind.ADMIT]) if entry == UNKNOWN else entry
        assert entry <= CHOICE, (tenant, entry)
        choice = product.choices[CHOICE - entry]
        assert choice.gates, tenant
        assert choice.decide(inst, Admit(0.1, rid, Basis.SURPLUS)) >= 0
        assert choice.decide(inst, Admit(0.1, rid, Basis.FLOOR)) == SLOW


def test_fast_entries_are_exactly_the_table_fixed_moves() -> None:
    comps = [BUILTIN[n].compile() for n in ("AF", "SF", "DR")]
    wf_c = wf.WF.compile()
    wf_next = [-1 if e is None else e[0][0] for e in wf_c.table]
    product = Product(wf_next, wf_c.index[wf.Loc.NEW], wf_c.index[wf.Loc.DONE], comps)
    frontier = [0]
    seen = {0}
    gated_seen = 0
    while frontier:
        state = frontier.pop()
        for code in range(len(EventKind)):
            assert product.next[state * len(EventKind) + code] == UNKNOWN
            entry = product.resolve(state, code)
            locs = product.states[state]
            if wf_next[locs[0] * len(EventKind) + code] < 0:
                assert entry == ILLEGAL
                continue
            moves = [fixed_move(c, loc, code) for c, loc in zip(comps, locs[1:], strict=True)]
            expected = _expected_choice(comps, locs, code, moves)
            if expected is None:
                assert entry == SLOW
                continue
            guarded, gates, gated_targets = expected
            successors = []
            if guarded or gates:
                assert entry <= CHOICE
                choice = product.choices[CHOICE - entry]
                assert [b[1] for b in choice.branches] == guarded
                assert list(choice.gates) == gates
                gated_seen += bool(gates)
                for pos, edges, stay in choice.branches:  # each guarded automaton's possible targets
                    for target in {stay, *(to for _, to in edges)}:
                        locs2 = list(choice.base)
                        locs2[pos] = target
                        successors.append(product.intern(tuple(locs2)))
                for pos, target in gated_targets:  # where a gated edge (the slow path) may lead
                    locs2 = list(choice.base)
                    locs2[pos] = target
                    successors.append(product.intern(tuple(locs2)))
                if not choice.branches:
                    successors.append(product.intern(tuple(choice.base)))
            else:
                assert product.states[entry][1:] == tuple(moves)
                successors.append(entry)
            for nxt in successors:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
    assert gated_seen  # AF's upper side: admissions are gated, not slow
    assert len(product.states) < 5 * 6 * 4 * 6  # far fewer than all tuples
