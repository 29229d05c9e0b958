"""The tables bound to a contract and stepped together: the state the monitor and the shield share.

Theory of operation
-------------------
Each table is bound once (`rvguard.properties.bound.BoundTable`: names
resolved, guards, updates and each kind's choice of edge compiled to Python
functions). `Product` holds the bound tables, one instance per live request
(its location in each table, its request counters, its events so far) and
each table's other counters.

An event is stepped in two phases: `Product.plan` chooses each table's
edge (guards read the state before the event) without changing anything;
`Product.commit` takes the chosen edges (updates, locations, the event
appended to the request's witness). The monitor plans and commits every
event (reporting the edges into bad); the shield plans a controllable
event, and commits it only if no table goes bad (else its remedy, itself
planned again). A protocol table's bad edge refuses the event: nothing is
committed. `Product.step` is the shield's common case in one call: plan and
commit when no table goes bad, on a context and edge list reused event after
event (no plan built); else nothing changes.

A request's instance is created by its ``arrive`` and moved to a small
record of final locations at its terminal event (``retain`` of them kept,
oldest first out; ``None``: all), so that an event after the end is still
judged by the protocol table. Events of requests that never arrived reach
only protocol tables.

Cost: one chooser call per table with an edge on the event's kind, one
update call per chosen edge with updates; memory O(live requests × tables +
counters). This module is pure.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..contract import Contract
from ..errors import TraceOrderError
from ..events import Arrive, Event
from ..exact import window_index
from ..facts import FactsCache
from ..lifecycle import N_KINDS, NODE_CODES, TERMINAL_CODES
from .bound import BoundEdge, BoundTable, Chooser, Ctx, Inst, Stepper, stepper
from .table import PropertyTable, Scope

__all__ = ["BoundEdge", "BoundTable", "Ctx", "Inst", "Product", "facts_of"]


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


Plan = tuple[Inst, Ctx, list[BoundEdge | None]]
#: a table as `Product.plan` steps it: position, its chooser (for one kind), protocol
_Step = tuple[int, Chooser, bool]


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
        #: as (position, chooser, protocol), unpacked faster than attributes are read
        self._reacting: list[tuple[_Step, ...]] = [
            tuple(
                (b.position, choose, b.protocol)
                for b in self.tables
                if (choose := b.choosers[code]) is not None  # a chooser: some edge on the kind
            )
            for code in range(N_KINDS)
        ]
        #: whether `plan` can skip arrivals (no table has an edge on them: `arrive_by` makes the instance)
        self.quiet_arrivals = not self._reacting[0]
        self._ctx = Ctx.__new__(Ctx)  # `step`'s context and edges, reused event after event
        self._stores = [b.store for b in self.tables]
        self._ctx.stores, self._ctx.bad = self._stores, False
        self._nones: list[BoundEdge | None] = [None] * len(self.tables)
        self._chosen = list(self._nones)
        self._steppers: list[Stepper | None] = [None] * N_KINDS  # `step`'s, by kind code

    def plan(self, ev: Event) -> Plan | None:
        """Each table's chosen edge for ``ev`` (None: the event concerns no request we can judge).

        Raises:
            TraceOrderError: ``ev.t`` is before the previous event's time.
            UnknownTenantError: an arrival names a tenant the contract lacks.
        """
        inst = self._instance(ev)
        if inst is None:
            return None
        ctx = Ctx(ev, inst, self._stores)
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
        inst = self.live.get(ev.rid)  # live: arrived, so judged by every table
        code = ev.code
        if inst is None or code not in self.reactive or ev.t < self.now:
            return self._step(ev)
        step = self._steppers[code] or self._stepper(code)
        ctx = self._ctx
        ctx.ev, ctx.t, ctx.inst = ev, ev.t, inst
        if not step(ctx, inst.locs):  # a table goes bad: nothing changed
            return False
        self._after(inst, ev)
        return True

    def _stepper(self, code: int) -> Stepper:
        """The compiled step of kind ``code`` (`rvguard.properties.bound.stepper`), at its first event."""
        tables = [self.tables[p] for p, _, _ in self._reacting[code]]
        step = self._steppers[code] = stepper(tables, self.contract, code)
        return step

    def _step(self, ev: Event) -> bool:
        """`step` for an event of a request not live (an arrival, an event after the end or before
        the arrival, a node event), of a kind no table reacts to, or out of order."""
        code = ev.code
        if code not in self.reactive:  # no table has an edge for it: it passes, as planned
            self.pass_by(ev)
            return True
        if code == 0 and self.quiet_arrivals and self.arrive_by(ev):  # a new instance, no plan
            return True
        inst = self._instance(ev)
        if inst is None:
            self.advance(ev.t)
            return True
        if inst.facts is not None:  # arrived (a new instance): judged by every table, the compiled step
            ctx = self._ctx
            ctx.ev, ctx.t, ctx.inst = ev, ev.t, inst
            if not (self._steppers[code] or self._stepper(code))(ctx, inst.locs):
                return False
            self._after(inst, ev)
            return True
        ctx, chosen = self._ctx, self._chosen  # only protocol tables judge it
        ctx.ev, ctx.t, ctx.inst, ctx.bad = ev, ev.t, inst, False
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
        for pos, choose, protocol in self._reacting[ctx.ev.code]:
            if not judged and not protocol:
                continue  # a request that never arrived: only protocol tables judge it
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
        locs = inst.locs
        for pos, _, _ in self._reacting[ctx.ev.code]:  # a table with no edge on the kind chose none
            be = chosen[pos]
            if be is not None:
                take = be.take
                if take is not None:  # every right-hand side reads the state before, then all are set
                    take(ctx)
                locs[pos] = be.target
        self._after(inst, ctx.ev)

    def _after(self, inst: Inst, ev: Event) -> None:
        """The event taken: time moves, the event joins the witness, an arrival goes live, an end leaves."""
        if ev.t > self.now:
            self.now = ev.t
        inst.events.append(ev)
        code = ev.code
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
