"""The monitored automata fused into one product state per request.

Theory of operation
-------------------
A request's instance carries one int, its *product state*: the tuple of its
WF location and of each monitored automaton's location, interned on first
sight. ``next[state * N_KINDS + code]`` caches what an event of kind ``code`` does
from there:

* ``>= 0``: the next product state. Used when every automaton's move is
  fixed by its table alone: a single unguarded edge with no update into a
  location that is neither bad nor timed, or no move at all (a lenient
  automaton without an entry, an automaton in a final bad location). The monitor then
  only stores the int.
* ``<= CHOICE``: a `Choice`, when the automata that do not have a fixed
  move only choose between edges by their guards (no update, no bad or
  timed target): the monitor evaluates those guards, in table order, and
  looks the chosen targets up in the choice's own cache. AF's and SF's
  ``entitled`` branch at ``arrive`` is one; a choice whose guards are all
  `automaton.entitled` (a fact fixed at the arrival) is precompiled to one
  next state per value of that fact, so no guard is called per request.
  A choice may also carry *gates*: an automaton whose edges with an update or
  a bad target all have guards that imply a cheap test of the event alone
  (the guard's ``event_gate``: AF's upper side, which only a ``floor``
  admission can take) is decided from its other edges when the test fails,
  and by the slow path (`SLOW`, returned by `Choice.decide`) when it holds.
  Every admission passes AF's upper side; only the floor ones pay for it.
* `SLOW`: some automaton has an update, a bad or timed target or (strict)
  a missing entry. The monitor steps the automata one by one from their
  compiled tables, exactly as before, and interns the result.
* `ILLEGAL`: WF refuses the event; nothing changes (rejection is atomic).
* `UNKNOWN`: not computed yet. Entries are filled the first time a
  ``(state, kind)`` pair occurs, so only reachable product states are built
  (AF, SF, DR and WF reach a few dozen of their 720 tuples).

The tables stay the definition: a fast entry is a move that does not depend
on the instance, taken from the same compiled table the slow path reads.
tests/monitors/test_product.py holds the two paths to the same verdicts.

Cost: O(1) per event on a cached entry; O(P) to fill an entry for P
automata; memory O(reachable product states).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..events import Event
from .automaton import N_KINDS, CompiledAutomaton, Guard, Instance, entitled

__all__ = ["CHOICE", "ILLEGAL", "SLOW", "UNKNOWN", "Choice", "Product"]

UNKNOWN, ILLEGAL, SLOW = -3, -2, -1
CHOICE = -4  # entry CHOICE - j is ``choices[j]``

Branch = tuple[int, tuple[tuple[Guard | None, int], ...], int]
#: a test of the event alone, true when some gated edge may be taken (`gated_move`)
EventGate = Callable[[Event], bool]


def fixed_move(comp: CompiledAutomaton, loc: int, code: int) -> int | None:
    """The automaton's next location if the table alone decides it and nothing else happens, else None."""
    if comp.final[loc]:
        return loc
    edges = comp.table[loc * N_KINDS + code]
    if edges is None:
        return None if comp.auto.strict else loc
    if len(edges) == 1:
        target, guard, update, _ = edges[0]
        if guard is None and update is None and not comp.bad[target] and not comp.timers[target]:
            return target
    return None


def guarded_move(comp: CompiledAutomaton, loc: int, code: int) -> tuple[tuple[Guard | None, int], ...] | None:
    """The automaton's ``(guard, target)`` edges if they differ only by guard, else None."""
    edges = comp.table[loc * N_KINDS + code]
    if edges is None:
        return None
    for target, _guard, update, _ in edges:
        if update is not None or comp.bad[target] or comp.timers[target]:
            return None
    return tuple((guard, target) for target, guard, _, _ in edges)


def gated_move(
    comp: CompiledAutomaton, loc: int, code: int
) -> tuple[EventGate, tuple[tuple[Guard | None, int], ...]] | None:
    """The gate and the other ``(guard, target)`` edges when every edge with an update or a bad or
    timed target has a guard that implies one test of the event (its ``event_gate``) and the other
    edges differ only by guard; else None. With the gate false, those edges cannot be taken."""
    edges = comp.table[loc * N_KINDS + code]
    if edges is None:
        return None
    gates: set[EventGate] = set()
    rest: list[tuple[Guard | None, int]] = []
    for target, guard, update, _ in edges:
        if update is None and not comp.bad[target] and not comp.timers[target]:
            rest.append((guard, target))
            continue
        gate = getattr(guard, "event_gate", None)
        if gate is None:
            return None
        gates.add(gate)
    if len(gates) != 1:
        return None
    return gates.pop(), tuple(rest)


class Choice:
    """A move decided by guards alone.

    ``base`` holds the next locations with the guarded positions unset;
    ``branches`` lists, per guarded automaton, its product position, its
    ``(guard, target)`` edges in table order and where it stays when no
    guard holds. ``memo`` maps the chosen targets to the next state.
    """

    __slots__ = ("base", "branches", "by_entitled", "gates", "memo", "product")

    def __init__(
        self, product: Product, base: list[int], branches: list[Branch], gates: Sequence[EventGate] = ()
    ) -> None:
        self.product = product
        self.base = base
        self.branches = branches
        #: tests of the event that, when one holds, send it down the slow path (module doc)
        self.gates = tuple(gates)
        self.memo: dict[tuple[int, ...], int] = {}
        guards = {guard for _, edges, _ in branches for guard, _ in edges}
        #: when every guard is `entitled` (a fact fixed at arrival): the next state for
        #: ``inst.entitled`` False / True, filled on first use (-1: not yet); else None
        self.by_entitled: list[int] | None = [-1, -1] if guards <= {None, entitled} else None

    def decide(self, inst: Instance, ev: Event) -> int:
        """Evaluate the guards on this request and event; return the next product state, or `SLOW`
        when a gate holds (the automata are then stepped one by one)."""
        for gate in self.gates:
            if gate(ev):
                return SLOW
        fixed = self.by_entitled
        if fixed is None:
            return self._decide(inst, ev)
        state = fixed[inst.entitled]
        if state < 0:
            state = fixed[inst.entitled] = self._decide(inst, ev)
        return state

    def _decide(self, inst: Instance, ev: Event) -> int:
        chosen = []
        for _, edges, stay in self.branches:
            target = stay
            for guard, to in edges:
                if guard is None or guard(inst, ev):
                    target = to
                    break
            chosen.append(target)
        key = tuple(chosen)
        state = self.memo.get(key)
        if state is None:
            locs = list(self.base)
            for (pos, _, _), target in zip(self.branches, key, strict=True):
                locs[pos] = target
            state = self.memo[key] = self.product.intern(tuple(locs))
        return state


class Product:
    """Product states of WF (position 0) and the monitored automata (positions 1..P).

    Args:
        wf_next: WF's flat next-location table (``-1`` = illegal).
        wf_initial: WF's initial location; ``wf_done``: its final one.
        comps: the monitored automata, compiled.
    """

    __slots__ = ("choices", "comps", "done", "ids", "next", "states", "wf_done", "wf_next")

    def __init__(
        self, wf_next: Sequence[int], wf_initial: int, wf_done: int, comps: Sequence[CompiledAutomaton]
    ) -> None:
        self.wf_next = list(wf_next)
        self.wf_done = wf_done
        self.comps = list(comps)
        self.states: list[tuple[int, ...]] = []
        self.ids: dict[tuple[int, ...], int] = {}
        #: the transition cache, ``N_KINDS`` entries per state (see the module docstring)
        self.next: list[int] = []
        #: per state: WF is in its final location (the request is finished)
        self.done: list[bool] = []
        self.choices: list[Choice] = []
        self.intern((wf_initial, *(c.index[c.auto.initial] for c in self.comps)))  # state 0

    def intern(self, locs: tuple[int, ...]) -> int:
        """The id of a location tuple, allocated on first sight."""
        state = self.ids.get(locs)
        if state is None:
            state = self.ids[locs] = len(self.states)
            self.states.append(locs)
            self.next.extend([UNKNOWN] * N_KINDS)
            self.done.append(locs[0] == self.wf_done)
        return state

    def resolve(self, state: int, code: int) -> int:
        """Compute (and cache) the entry of ``(state, code)``."""
        entry = self._move(state, code)
        self.next[state * N_KINDS + code] = entry
        return entry

    def _move(self, state: int, code: int) -> int:
        locs = self.states[state]
        wf = self.wf_next[locs[0] * N_KINDS + code]
        if wf < 0:
            return ILLEGAL
        new = [wf]
        branches: list[Branch] = []
        gates: list[EventGate] = []
        for pos, (comp, loc) in enumerate(zip(self.comps, locs[1:], strict=True), start=1):
            target = fixed_move(comp, loc, code)
            if target is None:
                edges = guarded_move(comp, loc, code)
                if edges is None:
                    gated = gated_move(comp, loc, code)
                    if gated is None:
                        return SLOW
                    gates.append(gated[0])
                    edges = gated[1]
                target = _single(edges)
                if target is None:
                    branches.append((pos, edges, loc))
                    target = loc
            new.append(target)
        if not branches and not gates:
            return self.intern(tuple(new))
        self.choices.append(Choice(self, new, branches, gates))
        return CHOICE - (len(self.choices) - 1)


def _single(edges: tuple[tuple[Guard | None, int], ...]) -> int | None:
    """The target of a lone unguarded edge (the move is fixed), else None."""
    if len(edges) == 1 and edges[0][0] is None:
        return edges[0][1]
    return None
