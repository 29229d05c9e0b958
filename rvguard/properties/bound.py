"""A property table bound to a contract: its names resolved, its guards, updates and choice of edge
compiled once to Python functions (`rvguard.properties.guards.Source`), its counters' store.

Theory of operation
-------------------
`BoundTable` resolves every name of a table once (the event's ``t`` and basis
names, a fact, a parameter, a counter of some scope) to a fragment of source
read in place, and compiles each guard and each edge's updates to one function
over the context ``c`` (`Ctx`), and for each kind a
*chooser*: the edge a request at a location takes (its edges tried in order,
their guards written in place). ``edges[loc * N_KINDS + code]`` is the tuple of
edges to try. A guard ``not (g)`` after an edge guarded by ``g`` is taken
without evaluating it (``g`` was false when it is tried). A guard too deep for
one Python expression (`SOURCE_DEPTH`) is compiled to closures
(`rvguard.properties.guards.compile_expr`) and called. The functions read the
counters through the context, so one compilation serves every product of the
same table, contract and position.

What the functions read: `Ctx` (the event, its time, the request's `Inst`:
facts, locations, request counters; every table's counters). A table's
counters are one dict each (`Store`), keyed by the tenant, the instance's
``(tenant, window)`` tuple, or the counter's name (shared). This module is
pure.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from ..contract import Contract
from ..events import Admit, Basis, Event, Fail
from ..lifecycle import CODE, N_KINDS
from ..watch_events import FLOOR_REFUSED
from .guards import SOURCE_DEPTH, Bool, Expr, Not, Source, Update, compile_expr, depth
from .table import CONTRACT_NAMES, GUARD_ENDS, Edge, PropertyTable, Scope

__all__ = ["BoundEdge", "BoundTable", "Chooser", "Ctx", "Getter", "Inst", "Stepper", "Store", "stepper"]

Getter = Callable[["Ctx"], Any]

#: a table's counters: one dict per counter, by key (a tenant, a tenant and window, or its name)
Store = list[dict[Any, float]]


_NO_VARS: list[dict[str, float]] = []  # `Inst.vars` when no table has request counters (never written)


class Inst:
    """One request: its facts, its location and request counters per table, its events so far."""

    __slots__ = ("events", "facts", "locs", "rid", "tenant", "tw", "vars", "window")

    def __init__(
        self,
        rid: str,
        tenant: str,
        window: int,
        facts: dict[str, float] | None,
        locs: list[int],
        counters: bool = True,
    ) -> None:
        self.rid = rid
        self.tenant = tenant
        self.window = window
        self.tw = (tenant, window)  # the key of its tenant-window counters
        self.facts = facts  # None: the request never arrived (only protocol tables judge it)
        self.locs = locs
        #: request counters per table (``counters`` false: no table has any, none are made)
        self.vars: list[dict[str, float]] = [{} for _ in locs] if counters else _NO_VARS
        self.events: list[Event] = []


class Ctx:
    """What a guard reads: the event, its time, the request's instance and the tables' counters."""

    __slots__ = ("bad", "ev", "inst", "stores", "t")

    def __init__(self, ev: Event, inst: Inst, stores: list[Store]) -> None:
        self.ev = ev
        self.t = ev.t
        self.inst = inst
        #: each table's counters, by the table's position in the product
        self.stores = stores
        #: whether `Product.plan` chose an edge into some table's bad location
        self.bad = False


def _basis(which: Basis) -> Callable[[Source], str]:
    return lambda s: (
        f"(1.0 if {s.bind(isinstance)}(c.ev, {s.bind(Admit)}) and c.ev.basis is {s.bind(which)} else 0.0)"
    )


def _floor_credit(s: Source) -> str:
    admit, floor = s.bind(Admit), s.bind(Basis.FLOOR)
    on_floor = f"{s.bind(isinstance)}(c.ev, {admit}) and c.ev.basis is {floor}"
    return f"(c.inst.facts[{s.bind('weight')}] if c.inst.facts and {on_floor} else 0.0)"


def _preempted(s: Source) -> str:
    ends = s.bind(GUARD_ENDS)
    return f"(1.0 if {s.bind(isinstance)}(c.ev, {s.bind(Fail)}) and c.ev.reason in {ends} else 0.0)"


def floor_refused(ev: Event) -> float:
    """1.0 when ``ev`` records a declared refusal of the floor (its ``floor_refused`` field), else 0.0."""
    return 1.0 if FLOOR_REFUSED in getattr(ev, "extra", ()) else 0.0


#: the event's names as `Source` fragments (written in place in a compiled guard or update)
_EVENT_SOURCES: dict[str, Callable[[Source], str]] = {
    "t": lambda s: "c.t",
    "floor_basis": _basis(Basis.FLOOR),
    "surplus_basis": _basis(Basis.SURPLUS),
    "demoted_basis": _basis(Basis.DEMOTED),
    "floor_credit": _floor_credit,
    "preempted": _preempted,
    "floor_refused": lambda s: f"{s.bind(floor_refused)}(c.ev)",
}


def _event_getter(name: str) -> Getter:
    src = Source(lambda n, s: n)  # the fragments name nothing of a table
    return src.function("c", "return " + _EVENT_SOURCES[name](src))


#: the same as getters (the closures of a guard too deep for one expression read them)
_EVENT_GETTERS: dict[str, Getter] = {name: _event_getter(name) for name in _EVENT_SOURCES}


class BoundEdge:
    """An edge with its guard and updates compiled; ``target`` a location index. ``guard`` None:
    taken whenever it is tried; ``take`` sets its counters (None: it has no updates)."""

    __slots__ = ("bad", "edge", "guard", "take", "target")

    def __init__(
        self,
        edge: Edge,
        target: int,
        bad: bool,
        guard: Getter | None,
        take: Callable[[Ctx], None] | None,
    ) -> None:
        self.edge = edge
        self.target = target
        self.bad = bad
        self.guard = guard
        self.take = take


#: a table's choice for one kind: the edge taken from a location (its guards in place), None: no edge
Chooser = Callable[["Ctx", int], "BoundEdge | None"]
#: `stepper`'s function: the context and the request's locations; False when a table goes bad
Stepper = Callable[["Ctx", list[int]], bool]
_Compiled = tuple[list[tuple[BoundEdge, ...] | None], list[Chooser | None]]
#: compiled edges by (table, contract, position): binding WF's ninety edges costs milliseconds
_COMPILED: dict[tuple[int, int, int], tuple[PropertyTable, Contract, _Compiled]] = {}


class BoundTable:
    """A table bound to a contract: names resolved, guards compiled, its counters' store."""

    def __init__(self, table: PropertyTable, contract: Contract, position: int) -> None:
        self.table = table
        self.name = table.name
        self.position = position
        self.protocol = table.protocol
        self.index = {loc: i for i, loc in enumerate(table.locations)}
        self.initial = self.index[table.initial]
        self.bad = self.index[table.bad]
        self.store: Store = [{} for _ in table.counters]
        self._slots = {c.name: i for i, c in enumerate(table.counters)}  # each counter's dict in `store`
        self._constants: dict[str, float] = {
            "slots": contract.slots,
            "reserve": contract.reserve,
            "window": contract.window,
        }
        self._constants |= {k: float(v) for k, v in table.params.items()}
        assert set(CONTRACT_NAMES) <= set(self._constants)
        key = (id(table), id(contract), position)
        cached = _COMPILED.get(key)
        if cached is None or cached[0] is not table or cached[1] is not contract:
            if len(_COMPILED) >= 256:
                _COMPILED.clear()  # bounded: a process judging many contracts recompiles
            cached = _COMPILED[key] = (table, contract, self._compile())
        self.edges, self.choosers = cached[2]
        #: the kind codes some edge of this table reacts to
        self.codes = frozenset(CODE[e.kind] for e in table.edges)

    def _compile(self) -> _Compiled:
        """The edges by ``location * N_KINDS + code``, guards and updates compiled, and a chooser by
        kind code (state-free: they read the counters through the context, so one compilation serves
        every product)."""
        table = self.table
        self._source = Source(self._name_source)  # one for the table: its functions share their globals
        edges: list[tuple[BoundEdge, ...] | None] = [None] * (len(table.locations) * N_KINDS)
        for e in table.edges:
            slot = self.index[e.source] * N_KINDS + CODE[e.kind]
            earlier = edges[slot] or ()
            edges[slot] = (*earlier, self._bind(e, earlier))
        return edges, [self._chooser(edges, code) for code in range(N_KINDS)]

    def _chooser(self, edges: list[tuple[BoundEdge, ...] | None], code: int) -> Chooser | None:
        """One function choosing this table's edge for kind ``code`` from a location: each location's
        edges tried in order, their guards written in place (None: no edge on the kind)."""
        src = self._source
        lines: list[str] = []
        for loc in range(len(self.index)):
            tried = edges[loc * N_KINDS + code] or ()
            lines += [f"if loc == {loc:d}:"] if tried else []
            for be in tried:
                if be.guard is None:  # taken whenever tried: the edges after it never are
                    lines.append(f"    return {src.bind(be)}")
                    break
                deep = depth(be.edge.guard) > SOURCE_DEPTH  # a closure (`_guard`), called
                test = f"{src.bind(be.guard)}(c)" if deep else src.expr(be.edge.guard)
                lines.append(f"    if {test}:\n        return {src.bind(be)}")
        return src.function("c, loc", "\n".join([*lines, "return None"])) if lines else None

    def step_source(self, code: int, src: Source) -> tuple[list[str], list[str]]:
        """`stepper`'s source for this table and kind ``code``: the lines choosing the edge (its
        number in ``e<position>``, -1: none; ``bad = True`` when it goes bad), and the lines taking
        it (its updates written in place, then the request's location)."""
        pos, chosen, taken, n = self.position, [f"e{self.position} = -1"], [], 0
        for loc in range(len(self.index)):
            tried = self.edges[loc * N_KINDS + code] or ()
            chosen += [f"if locs[{pos:d}] == {loc:d}:"] if tried else []
            for i, be in enumerate(tried):
                pick = [f"e{pos} = {n:d}", *(["bad = True"] if be.bad else [])]
                if be.guard is not None:  # `_chooser`'s test
                    deep = depth(be.edge.guard) > SOURCE_DEPTH
                    test = f"{src.bind(be.guard)}(c)" if deep else src.expr(be.edge.guard)
                    chosen += [f"    {'elif' if i else 'if'} {test}:", *(f"        {x}" for x in pick)]
                else:  # taken whenever tried: the edges after it never are
                    chosen += [*(["    else:"] if i else []), *((" " * (8 if i else 4)) + x for x in pick)]
                taken += [f"{'elif' if n else 'if'} e{pos} == {n:d}:", *self._take_source(be, src)]
                n += 1
                if be.guard is None:
                    break
        return chosen, taken

    def _take_source(self, be: BoundEdge, src: Source) -> list[str]:
        """The statements taking ``be`` in a `stepper`, indented once (`_updates`, then the location)."""
        ups = be.edge.updates
        if be.take is not None and max(depth(u.value) for u in ups) > SOURCE_DEPTH:
            lines = [f"{src.bind(be.take)}(c)"]  # the closures, called
        else:
            lines = [f"x{i} = {src.expr(u.value)}" for i, u in enumerate(ups)]
            lines += [x for i, u in enumerate(ups) for x in self._set_source(u, f"x{i}", src).split("\n")]
        return [f"    {x}" for x in [*lines, f"locs[{self.position:d}] = {be.target:d}"]]

    def _bind(self, e: Edge, earlier: tuple[BoundEdge, ...]) -> BoundEdge:
        """``e`` compiled; ``earlier``: the edges tried before it (same location and kind). Its guard
        is None (always) when it is ``true``, or ``not (g)`` after an edge guarded by g: when ``e``
        is tried, g was false (AF's, RB's, CAP's and PR's second edges)."""
        target = self.index[e.target]
        g = e.guard
        always = g == Bool(True) or (isinstance(g, Not) and any(b.edge.guard == g.arg for b in earlier))
        guard = None if always else self._guard(g)
        take = self._updates(e.updates) if e.updates else None
        return BoundEdge(e, target, target == self.bad, guard, take)

    def _guard(self, g: Expr) -> Getter:
        """``g`` as one function (`Source`); a guard too deep to write as one expression as closures."""
        if depth(g) > SOURCE_DEPTH:
            return compile_expr(g, self.lookup)
        src = self._source
        return src.function("c", "return " + src.expr(g))

    def _updates(self, updates: tuple[Update, ...]) -> Callable[[Ctx], None]:
        """The edge's updates as one function: every right-hand side is read, then all are set."""
        if max(depth(u.value) for u in updates) > SOURCE_DEPTH:
            pairs = tuple((compile_expr(u.value, self.lookup), self._setter(u.name, u.op)) for u in updates)

            def take(c: Ctx) -> None:
                values = [value(c) for value, _ in pairs]
                for (_, setter), v in zip(pairs, values, strict=True):
                    setter(c, v)

            return take
        src = self._source
        lines = [f"x{i} = {src.expr(u.value)}" for i, u in enumerate(updates)]
        lines += [self._set_source(u, f"x{i}", src) for i, u in enumerate(updates)]
        return src.function("c", "\n".join(lines))

    def _name_source(self, name: str, src: Source) -> str:
        """``name``'s fragment in a `Source` (what `lookup`'s getter returns, read in place)."""
        event = _EVENT_SOURCES.get(name)
        if event is not None:
            return event(src)
        if name in self._constants:
            return src.bind(self._constants[name])
        counter = self.table.counter(name)
        if counter is None:
            return f"c.inst.facts[{src.bind(name)}]"
        init = src.bind(counter.initial)
        if counter.scope is Scope.REQUEST:
            return f"c.inst.vars[{self.position:d}].get({src.bind(name)}, {init})"
        key = _key_source(counter.scope, src.bind(name))
        return f"c.stores[{self.position:d}][{self._slots[name]:d}].get({key}, {init})"

    def _set_source(self, u: Update, value: str, src: Source) -> str:
        """The statements setting ``u``'s counter to ``value`` (an identifier), as `_setter` does."""
        counter = self.table.counter(u.name)
        assert counter is not None
        name = src.bind(u.name)
        if counter.scope is Scope.REQUEST:
            where, key = f"c.inst.vars[{self.position:d}]", name
        else:
            where = f"c.stores[{self.position:d}][{self._slots[u.name]:d}]"
            key = _key_source(counter.scope, name)
        if u.op == "=":
            return f"{where}[{key}] = {value}"
        sign = "+" if u.op == "+=" else "-"
        return f"o = {where}\nk = {key}\no[k] = o.get(k, {src.bind(counter.initial)}) {sign} {value}"

    def lookup(self, name: str) -> Getter:
        """The getter of ``name`` (table-checked: every name is known)."""
        getter = _EVENT_GETTERS.get(name)
        if getter is not None:
            return getter
        if name in self._constants:
            value = self._constants[name]
            return lambda c: value
        counter = self.table.counter(name)
        if counter is None:
            return lambda c: c.inst.facts[name]  # type: ignore[index]
        key, init, pos = _key(counter.scope, name), counter.initial, self.position
        if key is None:
            return lambda c: c.inst.vars[pos].get(name, init)
        slot = self._slots[name]
        return lambda c: c.stores[pos][slot].get(key(c), init)

    def _setter(self, name: str, op: str) -> Callable[[Ctx, float], None]:
        counter = self.table.counter(name)
        assert counter is not None
        key, init, pos = _key(counter.scope, name), counter.initial, self.position
        slot = self._slots[name]
        sign = 0.0 if op == "=" else (1.0 if op == "+=" else -1.0)
        if key is None:

            def set_request(c: Ctx, v: float) -> None:
                own = c.inst.vars[pos]
                own[name] = v if op == "=" else own.get(name, init) + sign * v

            return set_request

        def set_keyed(c: Ctx, v: float) -> None:
            k, store = key(c), c.stores[pos][slot]
            store[k] = v if op == "=" else store.get(k, init) + sign * v

        return set_keyed


def _key(scope: Scope, name: str) -> Callable[[Ctx], Any] | None:
    """The getter of a counter's key in its dict (None: a request counter, kept in the instance)."""
    if scope is Scope.REQUEST:
        return None
    if scope is Scope.TENANT:
        return lambda c: c.inst.tenant
    if scope is Scope.TENANT_WINDOW:
        return lambda c: c.inst.tw
    return lambda c: name


def _key_source(scope: Scope, name: str) -> str:
    """`_key`'s key as source (``name``: the identifier of the counter's name)."""
    if scope is Scope.TENANT:
        return "c.inst.tenant"
    if scope is Scope.TENANT_WINDOW:
        return "c.inst.tw"
    return name


#: a product's steppers by (its tables, contract, kind code): compiled once, as `_COMPILED`
_STEPPERS: dict[tuple[Any, ...], tuple[tuple[PropertyTable, ...], Contract, Stepper]] = {}


def stepper(tables: Sequence[BoundTable], contract: Contract, code: int) -> Stepper:
    """One function stepping every table with an edge on kind ``code`` (`Product.step`'s): each
    table's edge chosen (guards read the state before the event), then, when none goes bad, every
    chosen edge taken (updates in place, locations set) and True; False (nothing changed) when
    one goes bad. The tables' counters are disjoint, so taking them one after another is taking
    them together."""
    key = (*((id(b.table), b.position) for b in tables), id(contract), code)  # positions are in the code
    cached = _STEPPERS.get(key)
    if (
        cached is not None
        and cached[1] is contract
        and all(map(operator.is_, cached[0], (b.table for b in tables)))
    ):
        return cached[2]
    current: list[BoundTable] = []
    src = Source(lambda name, s: current[-1]._name_source(name, s))
    chosen, taken = [], []
    for b in tables:
        current.append(b)
        c, t = b.step_source(code, src)
        chosen += c
        taken += t
    fn: Stepper = src.function(
        "c, locs", "\n".join(["bad = False", *chosen, "if bad:", "    return False", *taken, "return True"])
    )
    if len(_STEPPERS) >= 256:
        _STEPPERS.clear()
    _STEPPERS[key] = (tuple(b.table for b in tables), contract, fn)
    return fn
