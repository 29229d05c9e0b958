"""The tables bound to a contract and stepped together: the state the monitor and the shield share.

Theory of operation
-------------------
`BoundTable` resolves every name of a table once (a fact, a parameter, a
counter of some scope) and compiles each guard and update to a closure
(`rvguard.properties.guards.compile_expr`); ``edges[loc * N_KINDS + code]``
is the tuple of edges to try. `Product` holds the bound tables, one
instance per live request (its location in each table, its request
counters, its events so far) and each table's other counters.

An event is stepped in two phases: `Product.plan` chooses each table's
edge (guards read the state before the event) without changing anything;
`Product.commit` takes the chosen edges (updates, locations, the event
appended to the request's witness). The monitor plans and commits every
event (reporting the edges into bad); the shield plans a controllable
event, and commits it only if no table goes bad (else its remedy, itself
planned again). A protocol table's bad edge refuses the event: nothing is
committed.

A request's instance is created by its ``arrive`` and moved to a small
record of final locations at its terminal event (``retain`` of them kept,
oldest first out; ``None``: all), so that an event after the end is still
judged by the protocol table. Events of requests that never arrived reach
only protocol tables.

Cost: O(E) guard calls per event for E edges tried; memory O(live requests
× tables + counters). This module is pure.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..contract import Contract
from ..errors import TraceOrderError
from ..events import Admit, Arrive, Basis, Event, Fail
from ..exact import window_index
from ..facts import FactsCache
from ..lifecycle import CODE, N_KINDS, NODE_CODES, TERMINAL_CODES
from .guards import SOURCE_DEPTH, Bool, Expr, Not, Source, Update, compile_expr, depth
from .table import CONTRACT_NAMES, GUARD_ENDS, Edge, PropertyTable, Scope

__all__ = ["BoundEdge", "BoundTable", "Ctx", "Inst", "Product", "facts_of"]

Getter = Callable[["Ctx"], Any]


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


#: a table's counters: one dict per counter, by key (a tenant, a tenant and window, or its name)
Store = list[dict[Any, float]]
_UNSET: Store = []  # `Ctx.store` until a table's is set (never written)


class Ctx:
    """What a guard reads: the event, its time and the request's instance."""

    __slots__ = ("bad", "ev", "inst", "store", "t")

    def __init__(self, ev: Event, inst: Inst) -> None:
        self.ev = ev
        self.t = ev.t
        self.inst = inst
        #: the counters of the table being stepped (set before each table's guards and updates run)
        self.store: Store = _UNSET
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


#: the event's names as `Source` fragments (written in place in a compiled guard or update)
_EVENT_SOURCES: dict[str, Callable[[Source], str]] = {
    "t": lambda s: "c.t",
    "floor_basis": _basis(Basis.FLOOR),
    "surplus_basis": _basis(Basis.SURPLUS),
    "demoted_basis": _basis(Basis.DEMOTED),
    "floor_credit": _floor_credit,
    "preempted": _preempted,
}


def _event_getter(name: str) -> Getter:
    src = Source(lambda n, s: n)  # the fragments name nothing of a table
    return src.function("c", "return " + _EVENT_SOURCES[name](src))


#: the same as getters (the closures of a guard too deep for one expression read them)
_EVENT_GETTERS: dict[str, Getter] = {name: _event_getter(name) for name in _EVENT_SOURCES}


def facts_of(
    contract: Contract,
    cache: FactsCache,
    ev: Arrive,
    shapes: dict[tuple[Any, ...], tuple[Any, dict[str, float]]] | None = None,
) -> dict[str, float]:
    """A request's facts (`rvguard.properties.table.FACT_NAMES`) from its arrival; ``shapes`` keeps
    the request facts and the facts that depend only on the request's tenant and sizes, by shape (a
    `Product` passes its own).

    Raises:
        UnknownTenantError: the tenant is not in the contract.
    """
    key = (ev.tenant, ev.prompt_tokens, ev.max_tokens)
    shape = None if shapes is None else shapes.get(key)
    if shape is None:
        f = cache(ev.tenant, ev.prompt_tokens, ev.max_tokens)
        shape = (f, _static_facts(cache, f, ev))
        if shapes is not None and len(shapes) < 4096:
            shapes[key] = shape
    f, static = shape
    return {"arrival": ev.t, "deadline": f.deadline(ev.t, ev.deadline), **static}


def _static_facts(cache: FactsCache, f: Any, ev: Arrive) -> dict[str, float]:
    return {
        "lower": f.lower,
        "upper": math.inf if f.upper is None else f.upper,
        "weight": float(f.weight_units),
        "floor": float(cache.units.floors.get(ev.tenant, 0)),
        "floored": 1.0 if f.floored else 0.0,
        "tier": float(f.tier),
        "tokens": float(f.capped_tokens),
        "prompt": float(ev.prompt_tokens or 0),
    }


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
Chooser = Callable[[Ctx, int], BoundEdge | None]
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
        return f"c.store[{self._slots[name]:d}].get({key}, {init})"

    def _set_source(self, u: Update, value: str, src: Source) -> str:
        """The statements setting ``u``'s counter to ``value`` (an identifier), as `_setter` does."""
        counter = self.table.counter(u.name)
        assert counter is not None
        name = src.bind(u.name)
        if counter.scope is Scope.REQUEST:
            where, key = f"c.inst.vars[{self.position:d}]", name
        else:
            where, key = f"c.store[{self._slots[u.name]:d}]", _key_source(counter.scope, name)
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
        return lambda c: c.store[slot].get(key(c), init)

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
            k, store = key(c), c.store[slot]
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


Plan = tuple[Inst, Ctx, list[BoundEdge | None]]
#: a table as `Product.plan` steps it: position, its chooser (for one kind), counters, protocol
_Step = tuple[int, Chooser, Store, bool]


class Product:
    """The bound tables stepped together over one event stream (see the module docstring)."""

    def __init__(
        self, contract: Contract, tables: Sequence[PropertyTable], *, retain: int | None = None
    ) -> None:
        self.contract = contract
        self.tables = [BoundTable(t, contract, i) for i, t in enumerate(tables)]
        self._facts = FactsCache(contract)
        self._shapes: dict[tuple[Any, ...], tuple[Any, dict[str, float]]] = {}  # `facts_of`'s, by shape
        self._origin, self._window = contract.epoch, contract.window
        self.live: dict[str, Inst] = {}
        self._finished: dict[str, list[int]] = {}
        self._order: deque[str] = deque()
        self._retain = retain
        self.now = -math.inf
        #: the kinds that can change anything: some table's edge, an arrival (a new instance), an end
        self.reactive = frozenset().union(*(b.codes for b in self.tables), {0}, TERMINAL_CODES)
        #: whether some table keeps a per-tenant-window counter (else an arrival's window is not computed)
        self._windowed = any(c.scope is Scope.TENANT_WINDOW for b in self.tables for c in b.table.counters)
        #: whether some table keeps request counters (else an instance makes no dict per table)
        self._counters = any(c.scope is Scope.REQUEST for b in self.tables for c in b.table.counters)
        self._initial = tuple(b.initial for b in self.tables)
        #: per kind code, the tables with an edge on it (the others are skipped by `plan` and `commit`)
        #: as (position, chooser, counters, protocol), unpacked faster than attributes are read
        self._reacting: list[tuple[_Step, ...]] = [
            tuple(
                (b.position, choose, b.store, b.protocol)
                for b in self.tables
                if (choose := b.choosers[code]) is not None  # a chooser: some edge on the kind
            )
            for code in range(N_KINDS)
        ]
        #: whether `plan` can skip arrivals (no table has an edge on them: `arrive_by` makes the instance)
        self.quiet_arrivals = not self._reacting[0]
        self._ctx: Ctx | None = None  # `step`'s context and edges, reused event after event
        self._nones: list[BoundEdge | None] = [None] * len(self.tables)
        self._chosen = list(self._nones)

    def plan(self, ev: Event) -> Plan | None:
        """Each table's chosen edge for ``ev`` (None: the event concerns no request we can judge).

        Raises:
            TraceOrderError: ``ev.t`` is before the previous event's time.
            UnknownTenantError: an arrival names a tenant the contract lacks.
        """
        inst = self._instance(ev)
        if inst is None:
            return None
        ctx = Ctx(ev, inst)
        chosen: list[BoundEdge | None] = [None] * len(self.tables)
        self._choose(ctx, chosen)
        return inst, ctx, chosen

    def step(self, ev: Event) -> bool:
        """`plan` and `commit` ``ev`` when no table's chosen edge goes bad (True), on the product's
        own context and edge list (no plan is built: the shield's common case); else False, and
        nothing changed (`plan` gives the edges). A kind no table reacts to takes `pass_by`, an
        arrival none reacts to `arrive_by`, a node event only moves time (all True).

        Raises:
            TraceOrderError, UnknownTenantError: as `plan`.
        """
        code = ev.code
        if code not in self.reactive:  # no table has an edge for it: it passes, as planned
            self.pass_by(ev)
            return True
        if code == 0 and self.quiet_arrivals and self.arrive_by(ev):  # a new instance, no plan
            return True
        inst = self.live.get(ev.rid)
        if inst is None or ev.t < self.now:  # `_instance` checks the order, makes the instance
            inst = self._instance(ev)
            if inst is None:
                self.advance(ev.t)
                return True
        ctx = self._ctx
        if ctx is None:
            ctx = self._ctx = Ctx(ev, inst)
        else:
            ctx.ev, ctx.t, ctx.inst, ctx.bad = ev, ev.t, inst, False
        chosen = self._chosen
        self._choose(ctx, chosen)
        ok = not ctx.bad
        if ok:
            self._take(inst, ctx, chosen)
        chosen[:] = self._nones
        return ok

    def _instance(self, ev: Event) -> Inst | None:
        """``ev``'s request instance (new when not live; not kept until committed), None for a node event."""
        if ev.t < self.now:
            raise TraceOrderError(f"time {ev.t!r} is before the previous event's {self.now!r}", field="t")
        if ev.code in NODE_CODES:
            return None
        inst = self.live.get(ev.rid)
        return self._new(ev) if inst is None else inst

    def _choose(self, ctx: Ctx, chosen: list[BoundEdge | None]) -> None:
        """Each reacting table's first edge whose guard holds, into ``chosen`` (``ctx.bad``: one goes bad)."""
        inst = ctx.inst
        locs, judged = inst.locs, inst.facts is not None
        for pos, choose, store, protocol in self._reacting[ctx.ev.code]:  # the loop every event runs
            if not judged and not protocol:
                continue  # a request that never arrived: only protocol tables judge it
            ctx.store = store
            be = choose(ctx, locs[pos])
            if be is not None:
                chosen[pos] = be
                if be.bad:
                    ctx.bad = True

    def _new(self, ev: Event) -> Inst:
        ended = self._finished.get(ev.rid)
        if ended is not None:
            return Inst(ev.rid, "", 0, None, list(ended), self._counters)
        locs = list(self._initial)
        if isinstance(ev, Arrive):
            facts = facts_of(self.contract, self._facts, ev, self._shapes)
            window = window_index(ev.t, self._origin, self._window) if self._windowed else 0
            return Inst(ev.rid, ev.tenant, window, facts, locs, self._counters)
        return Inst(ev.rid, "", 0, None, locs, self._counters)

    def refused(self, chosen: list[BoundEdge | None]) -> bool:
        """Whether a protocol table refuses the event."""
        return any(be is not None and be.bad and self.tables[i].protocol for i, be in enumerate(chosen))

    def commit(self, plan: Plan) -> None:
        """Take the planned edges; the event joins the request's witness."""
        self._take(*plan)

    def _take(self, inst: Inst, ctx: Ctx, chosen: list[BoundEdge | None]) -> None:
        if ctx.t > self.now:
            self.now = ctx.t
        code = ctx.ev.code
        locs = inst.locs
        for pos, _, store, _ in self._reacting[code]:  # a table with no edge on the kind chose none
            be = chosen[pos]
            if be is not None:
                take = be.take
                if take is not None:  # every right-hand side reads the state before, then all are set
                    ctx.store = store
                    take(ctx)
                locs[pos] = be.target
        inst.events.append(ctx.ev)
        if inst.facts is None:
            return
        if code == 0 and inst.rid not in self.live and inst.rid not in self._finished:
            self.live[inst.rid] = inst
        elif code in TERMINAL_CODES and self.live.get(inst.rid) is inst:
            del self.live[inst.rid]
            self._finish(inst.rid, inst.locs)

    def _finish(self, rid: str, locs: list[int]) -> None:
        if self._retain is not None and self._retain <= 0:
            return
        self._finished[rid] = locs
        if self._retain is not None:
            self._order.append(rid)
            if len(self._order) > self._retain:
                self._finished.pop(self._order.popleft(), None)

    def arrive_by(self, ev: Event) -> bool:
        """An arrival no table has an edge for, of a request not seen before: what `plan` and
        `commit` would do with no edge chosen (a new instance, live) without building a plan; False
        (nothing done) when the arrival needs the plan.

        Raises:
            TraceOrderError: ``ev.t`` is before the previous event's time.
            UnknownTenantError: the arrival names a tenant the contract lacks.
        """
        rid = ev.rid
        if not self.quiet_arrivals or not isinstance(ev, Arrive) or rid in self.live or rid in self._finished:
            return False
        if ev.t < self.now:
            raise TraceOrderError(f"time {ev.t!r} is before the previous event's {self.now!r}", field="t")
        inst = self._new(ev)
        inst.events.append(ev)
        self.live[rid] = inst
        self.now = ev.t
        return True

    def pass_by(self, ev: Event) -> None:
        """Step an event of a kind no table reacts to (not in `reactive`): what `plan` and `commit`
        would do with no edge chosen — check the order, join the request's witness, move time.

        Raises:
            TraceOrderError: ``ev.t`` is before the previous event's time.
        """
        if ev.t < self.now:
            raise TraceOrderError(f"time {ev.t!r} is before the previous event's {self.now!r}", field="t")
        inst = self.live.get(ev.rid)
        if inst is not None:
            inst.events.append(ev)
        self.now = ev.t

    def advance(self, t: float) -> None:
        """Move time to ``t`` (no table has timers: only the order check reads it)."""
        self.now = max(self.now, t)
