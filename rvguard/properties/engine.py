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
from .guards import Bool, compile_expr
from .table import CONTRACT_NAMES, GUARD_ENDS, Edge, PropertyTable, Scope

__all__ = ["BoundEdge", "BoundTable", "Ctx", "Inst", "Product", "facts_of"]

Getter = Callable[["Ctx"], Any]


class Inst:
    """One request: its facts, its location and request counters per table, its events so far."""

    __slots__ = ("events", "facts", "locs", "rid", "tenant", "vars", "window")

    def __init__(
        self, rid: str, tenant: str, window: int, facts: dict[str, float] | None, locs: list[int]
    ) -> None:
        self.rid = rid
        self.tenant = tenant
        self.window = window
        self.facts = facts  # None: the request never arrived (only protocol tables judge it)
        self.locs = locs
        self.vars: list[dict[str, float]] = [{} for _ in locs]
        self.events: list[Event] = []


class Ctx:
    """What a guard reads: the event, its time and the request's instance."""

    __slots__ = ("ev", "inst", "store", "t")

    def __init__(self, ev: Event, inst: Inst) -> None:
        self.ev = ev
        self.t = ev.t
        self.inst = inst
        #: the counters of the table being stepped (set before each table's guards run)
        self.store: dict[tuple[Any, ...], float] = {}


def _basis(which: Basis) -> Getter:
    return lambda c: 1.0 if isinstance(c.ev, Admit) and c.ev.basis is which else 0.0


def _floor_credit(c: Ctx) -> float:
    facts = c.inst.facts
    return facts["weight"] if facts and isinstance(c.ev, Admit) and c.ev.basis is Basis.FLOOR else 0.0


def _preempted(c: Ctx) -> float:
    return 1.0 if isinstance(c.ev, Fail) and c.ev.reason in GUARD_ENDS else 0.0


_EVENT_GETTERS: dict[str, Getter] = {
    "t": lambda c: c.t,
    "floor_basis": _basis(Basis.FLOOR),
    "surplus_basis": _basis(Basis.SURPLUS),
    "demoted_basis": _basis(Basis.DEMOTED),
    "floor_credit": _floor_credit,
    "preempted": _preempted,
}


def facts_of(
    contract: Contract,
    cache: FactsCache,
    ev: Arrive,
    shapes: dict[tuple[Any, ...], dict[str, float]] | None = None,
) -> dict[str, float]:
    """A request's facts (`rvguard.properties.table.FACT_NAMES`) from its arrival; ``shapes`` keeps
    the facts that depend only on the request's tenant and sizes, by shape (a `Product` passes its own).

    Raises:
        UnknownTenantError: the tenant is not in the contract.
    """
    f = cache(ev.tenant, ev.prompt_tokens, ev.max_tokens)
    key = (ev.tenant, ev.prompt_tokens, ev.max_tokens)
    static = None if shapes is None else shapes.get(key)
    if static is None:
        static = _static_facts(cache, f, ev)
        if shapes is not None and len(shapes) < 4096:
            shapes[key] = static
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
    """An edge with its guard and updates compiled; ``target`` a location index."""

    __slots__ = ("bad", "edge", "guard", "target", "updates")

    def __init__(
        self,
        edge: Edge,
        target: int,
        bad: bool,
        guard: Getter | None,
        updates: tuple[tuple[Getter, Callable[[Ctx, float], None]], ...],
    ) -> None:
        self.edge = edge
        self.target = target
        self.bad = bad
        self.guard = guard
        self.updates = updates


#: compiled edges by (table, contract, position): binding WF's ninety edges costs a millisecond
_COMPILED: dict[tuple[int, int, int], tuple[PropertyTable, Contract, list[tuple[BoundEdge, ...] | None]]] = {}


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
        self.store: dict[tuple[Any, ...], float] = {}
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
        self.edges = cached[2]
        #: the kind codes some edge of this table reacts to
        self.codes = frozenset(CODE[e.kind] for e in table.edges)

    def _compile(self) -> list[tuple[BoundEdge, ...] | None]:
        """The edges by ``location * N_KINDS + code``, guards and updates compiled (state-free closures:
        they read the counters through the context, so one compilation serves every product)."""
        table = self.table
        edges: list[tuple[BoundEdge, ...] | None] = [None] * (len(table.locations) * N_KINDS)
        for e in table.edges:
            slot = self.index[e.source] * N_KINDS + CODE[e.kind]
            edges[slot] = (*(edges[slot] or ()), self._bind(e))
        return edges

    def _bind(self, e: Edge) -> BoundEdge:
        target = self.index[e.target]
        ups = tuple((compile_expr(u.value, self.lookup), self._setter(u.name, u.op)) for u in e.updates)
        guard = None if e.guard == Bool(True) else compile_expr(e.guard, self.lookup)  # None: always
        return BoundEdge(e, target, target == self.bad, guard, ups)

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
        key, init, pos = self._key(name, counter.scope), counter.initial, self.position
        if key is None:
            return lambda c: c.inst.vars[pos].get(name, init)
        return lambda c: c.store.get(key(c), init)

    def _key(self, name: str, scope: Scope) -> Callable[[Ctx], tuple[Any, ...]] | None:
        if scope is Scope.REQUEST:
            return None
        if scope is Scope.TENANT:
            return lambda c: (name, c.inst.tenant)
        if scope is Scope.TENANT_WINDOW:
            return lambda c: (name, c.inst.tenant, c.inst.window)
        return lambda c: (name,)

    def _setter(self, name: str, op: str) -> Callable[[Ctx, float], None]:
        counter = self.table.counter(name)
        assert counter is not None
        key, init, pos = self._key(name, counter.scope), counter.initial, self.position
        sign = 0.0 if op == "=" else (1.0 if op == "+=" else -1.0)
        if key is None:

            def set_request(c: Ctx, v: float) -> None:
                own = c.inst.vars[pos]
                own[name] = v if op == "=" else own.get(name, init) + sign * v

            return set_request

        def set_keyed(c: Ctx, v: float) -> None:
            k, store = key(c), c.store
            store[k] = v if op == "=" else store.get(k, init) + sign * v

        return set_keyed

    def take(self, inst: Inst, ctx: Ctx, be: BoundEdge) -> None:
        """Take a chosen edge: every right-hand side reads the state before, then all are set."""
        updates = be.updates
        if len(updates) == 1:  # the common case: no list of values built
            value, setter = updates[0]
            setter(ctx, value(ctx))
        elif updates:
            values = [value(ctx) for value, _ in updates]
            for (_, setter), v in zip(updates, values, strict=True):
                setter(ctx, v)
        inst.locs[self.position] = be.target


Plan = tuple[Inst, Ctx, list[BoundEdge | None]]


class Product:
    """The bound tables stepped together over one event stream (see the module docstring)."""

    def __init__(
        self, contract: Contract, tables: Sequence[PropertyTable], *, retain: int | None = None
    ) -> None:
        self.contract = contract
        self.tables = [BoundTable(t, contract, i) for i, t in enumerate(tables)]
        self._facts = FactsCache(contract)
        self._shapes: dict[tuple[Any, ...], dict[str, float]] = {}  # `facts_of`'s, by request shape
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
        #: per kind code, the tables with an edge on it (the others are skipped by `plan` and `commit`)
        self._reacting: list[tuple[BoundTable, ...]] = [
            tuple(b for b in self.tables if code in b.codes) for code in range(N_KINDS)
        ]

    def plan(self, ev: Event) -> Plan | None:
        """Each table's chosen edge for ``ev`` (None: the event concerns no request we can judge).

        Raises:
            TraceOrderError: ``ev.t`` is before the previous event's time.
            UnknownTenantError: an arrival names a tenant the contract lacks.
        """
        if ev.t < self.now:
            raise TraceOrderError(f"time {ev.t!r} is before the previous event's {self.now!r}", field="t")
        code = ev.code
        if code in NODE_CODES:
            return None
        inst = self.live.get(ev.rid)
        if inst is None:
            inst = self._new(ev)
        ctx = Ctx(ev, inst)
        chosen: list[BoundEdge | None] = [None] * len(self.tables)
        locs, judged = inst.locs, inst.facts is not None
        for b in self._reacting[code]:  # `BoundTable.choose`, inlined: this loop runs for every event
            if not judged and not b.protocol:
                continue  # a request that never arrived: only protocol tables judge it
            edges = b.edges[locs[b.position] * N_KINDS + code]
            if edges is not None:
                ctx.store = b.store
                for be in edges:
                    guard = be.guard
                    if guard is None or guard(ctx):
                        chosen[b.position] = be
                        break
        return inst, ctx, chosen

    def _new(self, ev: Event) -> Inst:
        ended = self._finished.get(ev.rid)
        if ended is not None:
            return Inst(ev.rid, "", 0, None, list(ended))
        locs = [b.initial for b in self.tables]
        if isinstance(ev, Arrive):
            facts = facts_of(self.contract, self._facts, ev, self._shapes)
            window = window_index(ev.t, self._origin, self._window) if self._windowed else 0
            return Inst(ev.rid, ev.tenant, window, facts, locs)
        return Inst(ev.rid, "", 0, None, locs)

    def refused(self, chosen: list[BoundEdge | None]) -> bool:
        """Whether a protocol table refuses the event."""
        return any(be is not None and be.bad and self.tables[i].protocol for i, be in enumerate(chosen))

    def commit(self, plan: Plan) -> None:
        """Take the planned edges; the event joins the request's witness."""
        inst, ctx, chosen = plan
        if ctx.t > self.now:
            self.now = ctx.t
        code = ctx.ev.code
        for b in self._reacting[code]:  # a table with no edge on the kind chose none
            be = chosen[b.position]
            if be is not None:
                ctx.store = b.store
                b.take(inst, ctx, be)
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
        if self._reacting[0] or not isinstance(ev, Arrive) or rid in self.live or rid in self._finished:
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
