"""The online monitor: feed events one by one, read violations and metrics.

Each request carries one product state (`rvguard.monitors.product`): an
event whose move the tables fix costs one cached lookup; guard-decided moves
evaluate just those guards; the rest step the P automata one by one.

Cost: O(1) per event on a cached move, O(P) otherwise, plus O(log n) per
timer; memory O(live requests + retained finished rids + windows × tenants
+ reachable product states). Finished
requests are forgotten except their rids, kept so that an event after a
terminal one, or a second ``arrive``, is still caught: by default the last
``retain_finished`` = 100,000 (oldest first out), a horizon for a monitor
embedded in a long-running service; with ``retain_finished=None`` every one,
as ``rvguard check`` and the offline checker do, at about a hundred bytes a
rid (docs/performance.md).

A refused event — WF refuses it, or it names a tenant the contract lacks —
changes nothing, not even the monitor's time: it fires no timer. A node
event (``sample``, DESIGN §10) belongs to no request: it only moves time.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..contract import Contract, Entitlement
from ..errors import SpecError, TraceOrderError
from ..events import Arrive, Event
from ..facts import FactsCache, RequestFacts
from ..lifecycle import NODE_CODES
from ..verdict import Violation
from . import wf
from .accounting import MetricsAccumulator
from .af import AF
from .automaton import N_KINDS, CompiledAutomaton, Instance, TimedAutomaton
from .cap import CAP
from .dr import DR, ND
from .er import ER
from .ev import EV
from .fr import FR
from .metrics import Metrics
from .pr import PR
from .product import CHOICE, ILLEGAL, UNKNOWN, Product
from .rb import RB
from .rl import RL
from .sf import SF

__all__ = ["BUILTIN", "DEFAULT_PROPERTIES", "Monitor", "MonitorStatistics"]

BUILTIN: dict[str, TimedAutomaton] = {"AF": AF, "SF": SF, "DR": DR, "WF": wf.WF, "ND": ND, "RB": RB}
BUILTIN["CAP"] = CAP  # DESIGN §4's "at most C in flight"
BUILTIN |= {"PR": PR, "RL": RL, "EV": EV, "ER": ER, "FR": FR}  # DESIGN §10's mechanisms
#: the contract block each property needs, and what it reads there
_NEEDS = {
    "ND": ("service.upper", "an upper bound U: set service.upper in the contract"),
    "RL": ("headroom", "the contract's headroom block (staleness, dwell, resources)"),
    "EV": ("eviction", "the contract's eviction block (k)"),
    "ER": ("eviction", "the contract's eviction block"),
}
DEFAULT_PROPERTIES: tuple[str, ...] = ("AF", "SF", "DR", "WF", "RB", "CAP")

_WF = wf.WF.compile()
#: WF (the lifecycle) as a flat next-location table: ``_WF_NEXT[loc * N_KINDS + code]``, -1 = illegal
_WF_NEXT: list[int] = [-1 if e is None else e[0][0] for e in _WF.table]


@dataclass(frozen=True, slots=True)
class MonitorStatistics:
    """A snapshot of the monitor's load: for dashboards and memory tests."""

    events: int
    live_requests: int
    pending_timers: int
    retained_finished: int
    violations: int


def resolve_properties(
    contract: Contract, properties: Iterable[str | TimedAutomaton]
) -> list[TimedAutomaton]:
    """Turn names and automata into automata; reject unknown names and duplicates."""
    out: list[TimedAutomaton] = []
    for p in properties:
        auto = BUILTIN.get(p) if isinstance(p, str) else p
        if auto is None:
            raise SpecError(f"unknown property {p!r}: choose from {', '.join(BUILTIN)}", field="properties")
        if any(a.name == auto.name for a in out):
            raise SpecError(f"property {auto.name!r} given twice", field="properties", value=auto.name)
        need = _NEEDS.get(auto.name) if BUILTIN.get(auto.name) is auto else None
        if need is not None and _missing(contract, need[0]):
            raise SpecError(f"property {auto.name} needs {need[1]}", field=need[0])
        out.append(auto)
    return out


def _missing(contract: Contract, field: str) -> bool:
    node: object = contract
    for part in field.split("."):
        node = getattr(node, part)
    return node is None


class Monitor:
    """Online monitor of a contract's safety properties over one event stream.

    Args:
        contract: the contract the trace is judged against.
        properties: names of built-in properties (AF, SF, DR, WF, ND, RB, CAP, PR, RL, EV, ER, FR) or
            user-defined `TimedAutomaton` objects. WF's protocol is always
            run (it decides which events are legal); it is *reported* only
            when listed.
        retain_finished: how many finished rids to remember for WF (the most
            recent); ``None`` remembers every one (no horizon, memory grows
            with the distinct rids).

    Raises:
        SpecError: an unknown or duplicated property, or one whose contract block is missing
            (ND without U; RL without headroom; EV, ER without eviction). FR reads the contract's
            fleet block when it has one, else each route record's own bounds.
    """

    def __init__(
        self,
        contract: Contract,
        properties: Sequence[str | TimedAutomaton] = DEFAULT_PROPERTIES,
        *,
        retain_finished: int | None = 100_000,
    ) -> None:
        autos = resolve_properties(contract, properties)
        self.contract = contract
        self._report_wf = any(a is wf.WF for a in autos)
        self._autos = [a for a in autos if a is not wf.WF]
        self._compiled: list[CompiledAutomaton] = [a.compile() for a in self._autos]
        self._product = Product(_WF_NEXT, _WF.index[wf.Loc.NEW], _WF.index[wf.Loc.DONE], self._compiled)
        self._next = self._product.next  # the transition cache, extended in place
        self._done = self._product.done
        self._by_code: list[list[tuple[int, CompiledAutomaton]]] = [
            [(i, c) for i, c in enumerate(self._compiled) if code in c.codes] for code in range(N_KINDS)
        ]
        self._facts = FactsCache(contract)
        self._entitlement = Entitlement(contract)
        #: the variables each automaton's instances share (`TimedAutomaton.shared`), by its name
        self._shared = {a.name: a.shared(contract) for a in self._autos if a.shared is not None}
        #: the automata that learn from node events (`TimedAutomaton.node`), with their shared variables
        self._node_hooks = [(a.node, self._shared.get(a.name, {})) for a in self._autos if a.node is not None]
        self._live: dict[str, Instance] = {}
        self._finished: set[str] = set()
        self._finished_order: deque[str] = deque()
        self._retain = retain_finished
        self._timers: list[tuple[float, int, str, int, int]] = []
        self._due = math.inf  # the earliest timer bound
        self._seq = itertools.count()
        self._violations: list[Violation] = []
        self._now = float("-inf")
        self._metrics = MetricsAccumulator(
            slots=contract.slots,
            ceilings={n: contract.ceiling(n) for n in contract.tenants},
            window=contract.window,
            origin=contract.epoch,
        )
        self._account = self._metrics.handlers

    # -- public API --------------------------------------------------------
    @property
    def now(self) -> float:
        """The latest time the monitor has learned (``-inf`` before any)."""
        return self._now

    @property
    def properties(self) -> tuple[str, ...]:
        """Names of the reported properties."""
        names = tuple(a.name for a in self._autos)
        return (*names, "WF") if self._report_wf else names

    def feed(self, ev: Event) -> list[Violation]:
        """Consume one event; return the violations it revealed (timers included).

        Raises:
            TraceOrderError: ``ev.t`` is earlier than the monitor's time.
            UnknownTenantError: an ``arrive`` names a tenant the contract lacks.
        """
        t = ev.t
        if t < self._now:
            raise TraceOrderError(f"time {t!r} is before the previous event's {self._now!r}", field="t")
        rid = ev.rid
        code = ev.code
        inst = self._live.get(rid)
        # Refusal is atomic, the clock included: decide before time moves (WF has no clocks,
        # so a timer never changes whether an event is legal).
        if inst is None:
            if code != 0 or rid in self._finished:
                return self._refuse(ev, None)
            facts = self._facts(ev.tenant, ev.prompt_tokens, ev.max_tokens)  # type: ignore[union-attr]
            # (an unknown tenant raises UnknownTenantError here, the clock unmoved)
        elif self._next[inst.state * N_KINDS + code] < 0 and self._refused(inst, code):
            return self._refuse(ev, inst)
        out: list[Violation] | None = None
        if t != self._now:
            if t > self._due:
                out = []
                self._move_time(t, out)
            else:
                self._now = t
        if inst is None:
            inst = self._create(ev, facts)  # type: ignore[arg-type]
        nxt = self._next[inst.state * N_KINDS + code]
        if nxt < 0:
            return self._feed_slow(inst, ev, code, nxt, [] if out is None else out)
        inst.state = nxt
        inst.events.append(ev)
        self._account[code](inst, ev, code)
        if self._done[nxt]:
            self._free(rid)
        return [] if out is None else out

    def feed_all(self, events: Iterable[Event]) -> list[Violation]:
        """Feed every event; return the violations revealed along the way (the batch form of `feed`
        for replay: a list extended only when an event revealed something). ``self.feed`` is called
        as a method, not bound once: the compiled build then calls it directly, without boxing."""
        out: list[Violation] = []
        for ev in events:
            found = self.feed(ev)
            if found:
                out.extend(found)
        return out

    def advance(self, t: float) -> list[Violation]:
        """Let time pass to ``t`` with no event: fires timer edges (SF deadlines).

        Raises:
            TraceOrderError: ``t`` is earlier than the monitor's time.
        """
        out: list[Violation] = []
        if t != self._now:
            self._move_time(t, out)
        return out

    def violations(self) -> list[Violation]:
        """All violations so far, sorted by (time, property, rid)."""
        return sorted(self._violations, key=lambda v: v.key)

    def summary(self) -> Metrics:
        """Metrics so far (DESIGN §3); deadlines not yet passed stay open."""
        now = None if self._now == float("-inf") else self._now
        return self._metrics.snapshot(list(self._live.values()), now)

    def statistics(self) -> MonitorStatistics:
        """Sizes of the monitor's state: events, live requests, timers, retained rids."""
        return MonitorStatistics(
            events=self._metrics.events,
            live_requests=len(self._live),
            pending_timers=len(self._timers),
            retained_finished=len(self._finished),
            violations=len(self._violations),
        )

    # -- internals ---------------------------------------------------------
    def _node(self, ev: Event) -> list[Violation]:
        """A node event (a ``sample``): it moves time (timers fire) and is counted; no request moves."""
        out: list[Violation] = []
        if ev.t != self._now:
            self._move_time(ev.t, out)
        for hook, shared in self._node_hooks:
            hook(shared, ev)
        self._metrics.on_node(ev)
        return out

    def _feed_slow(
        self, inst: Instance, ev: Event, code: int, entry: int, out: list[Violation]
    ) -> list[Violation]:
        """An event whose product entry is not a plain next state: step the automata one by one."""
        product = self._product
        state = inst.state
        if entry == UNKNOWN:
            entry = product.resolve(state, code)
        if entry == ILLEGAL:
            self._illegal(ev, wf.Loc(_WF.locs[product.states[state][0]]), inst, out)
            return out
        inst.events.append(ev)
        if entry <= CHOICE:
            entry = product.choices[CHOICE - entry].decide(inst, ev)  # SLOW when a gate holds
        if entry >= 0:
            inst.state = entry
        else:
            locs = list(product.states[state])
            locs[0] = _WF_NEXT[locs[0] * N_KINDS + code]
            self._step(inst, ev, code, locs, out)
            inst.state = product.intern(tuple(locs))
        self._account[code](inst, ev, code)
        if self._done[inst.state]:
            self._free(ev.rid)
        return out

    def _refused(self, inst: Instance, code: int) -> bool:
        """True when WF refuses ``code`` in the request's present location."""
        entry = self._next[inst.state * N_KINDS + code]
        if entry == UNKNOWN:
            entry = self._product.resolve(inst.state, code)
        return entry == ILLEGAL

    def _refuse(self, ev: Event, inst: Instance | None) -> list[Violation]:
        """A WF violation for an event the protocol does not allow; nothing changes, not even the time.

        A node event (no request, so no live instance) is not refused: `_node` takes it.
        """
        if inst is None and ev.code in NODE_CODES:
            return self._node(ev)
        out: list[Violation] = []
        if inst is not None:
            loc = wf.Loc(_WF.locs[self._product.states[inst.state][0]])
        else:
            loc = wf.Loc.DONE if ev.rid in self._finished else wf.Loc.NEW
        self._illegal(ev, loc, inst, out)
        return out

    def _move_time(self, t: float, out: list[Violation]) -> None:
        if t < self._now:
            raise TraceOrderError(f"time {t!r} is before the previous event's {self._now!r}", field="t")
        timers = self._timers
        states = self._product.states
        while timers and timers[0][0] < t:
            fire_t, _, rid, i, source = heapq.heappop(timers)
            inst = self._live.get(rid)
            if inst is None or states[inst.state][i + 1] != source:
                continue  # lazy deletion: the instance moved on or finished
            locs = list(states[inst.state])
            self._take_timer(inst, locs, i, fire_t, out)
            inst.state = self._product.intern(tuple(locs))
        self._due = timers[0][0] if timers else math.inf
        self._now = t

    def _take_timer(
        self, inst: Instance, locs: list[int], i: int, fire_t: float, out: list[Violation]
    ) -> None:
        """Automaton ``i`` takes its timer edge due at ``fire_t`` (``locs``: product locations)."""
        comp = self._compiled[i]
        for timer in comp.timers[locs[i + 1]]:
            if timer.bound(inst) != fire_t:
                continue
            target = comp.index[timer.target]
            locs[i + 1] = target
            if comp.bad[target]:
                detail = timer.detail(inst, None, fire_t) if timer.detail else timer.label
                self._report(comp, inst, fire_t, detail, out)
            else:
                self._schedule(inst, locs, i, target, out)
            return

    def _create(self, ev: Arrive, f: RequestFacts) -> Instance:
        t = ev.t
        window, entitled, rank, used = self._entitlement.arrive(ev.tenant, t, f.weight_units)
        deadline = f.deadline(t, ev.deadline)
        inst = Instance(
            ev.rid,
            ev.tenant,
            t,
            deadline,
            f.lower,
            f.upper,
            f.floored,
            f.weight,
            window,
            entitled,
            rank,
            used,
        )
        inst.shared = self._shared
        self._live[ev.rid] = inst
        return inst

    def _step(self, inst: Instance, ev: Event, code: int, locs: list[int], out: list[Violation]) -> None:
        """Step each automaton reacting to ``code``; ``locs`` are the product locations (WF first)."""
        for i, comp in self._by_code[code]:
            loc = locs[i + 1]
            if comp.final[loc]:
                continue
            edges = comp.table[loc * N_KINDS + code]
            if edges is None:
                if comp.auto.strict:
                    self._strict_reject(comp, locs, i, inst, ev, out)
                continue
            for target, guard, update, edge in edges:
                if guard is None or guard(inst, ev):
                    if update is not None:
                        update(inst, ev)
                    locs[i + 1] = target
                    if comp.bad[target]:
                        detail = edge.detail(inst, ev, ev.t) if edge.detail else edge.label
                        self._report(comp, inst, ev.t, detail, out)
                    elif comp.timers[target]:
                        self._schedule(inst, locs, i, target, out)
                    break

    def _strict_reject(
        self,
        comp: CompiledAutomaton,
        locs: list[int],
        i: int,
        inst: Instance,
        ev: Event,
        out: list[Violation],
    ) -> None:
        locs[i + 1] = comp.index[next(iter(comp.auto.bad))]
        detail = comp.auto.strict_detail(inst, ev, ev.t) if comp.auto.strict_detail else ""
        self._report(comp, inst, ev.t, detail or f"{ev.kind.value} not allowed", out)

    def _schedule(self, inst: Instance, locs: list[int], i: int, loc: int, out: list[Violation]) -> None:
        """Arm the location's timers; one whose bound has already passed fires now."""
        for timer in self._compiled[i].timers[loc]:
            bound = timer.bound(inst)
            if bound < self._now:
                self._take_timer(inst, locs, i, bound, out)
                return
            heapq.heappush(self._timers, (bound, next(self._seq), inst.rid, i, loc))
            if bound < self._due:
                self._due = bound

    def _report(
        self, comp: CompiledAutomaton, inst: Instance, t: float, detail: str, out: list[Violation]
    ) -> None:
        ctx = comp.auto.context(inst) if comp.auto.context else {}
        v = Violation(comp.auto.name, inst.rid, t, tuple(inst.events), detail, ctx)
        self._violations.append(v)
        out.append(v)

    def _illegal(self, ev: Event, loc: wf.Loc, inst: Instance | None, out: list[Violation]) -> None:
        """A WF violation: reported (if WF is monitored), and the event refused."""
        if not self._report_wf:
            return
        witness = (*inst.events, ev) if inst is not None else (ev,)
        v = Violation("WF", ev.rid, ev.t, witness, wf.illegal_detail(loc, ev), {"location": loc.value})
        self._violations.append(v)
        out.append(v)

    def _free(self, rid: str) -> None:
        del self._live[rid]
        if self._retain is None:
            self._finished.add(rid)
            return
        if self._retain <= 0:
            return
        self._finished.add(rid)
        self._finished_order.append(rid)
        if len(self._finished_order) > self._retain:
            self._finished.discard(self._finished_order.popleft())
