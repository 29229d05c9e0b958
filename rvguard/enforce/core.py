"""The enforcer's decision core: an edit/suppression automaton (DESIGN §4).

Theory of operation
-------------------
The core sits between an untrusted learner and the backend. It is pure: no
clock of its own (time comes in as ``now``), no I/O, no asyncio, so the same
object runs inside the asyncio `Guard` and inside the simulator. Its inputs
are an arrival (with the authenticated tenant and the learner's proposal), a
completion or failure of a dispatched request, a cancellation, and the
passing of time. Its outputs are the events of DESIGN §2, which go straight
into traces and monitors: the decision *is* the event.

Each live request is one instance of the per-request automaton in `TRANSITIONS`
(`rvguard.enforce.transitions`: the lifecycle's moves, each paired with the
`Action` its change of stage takes on the core's shared state, checked against
the lifecycle at import). Every state change goes through `DecisionCore._apply`,
which looks the edge up; a missing edge raises `EnforcementError` before
anything changes (rejection is atomic). A request is forgotten once it reaches
``DONE`` but its rid is kept (`rids.SpentRids`): a rid is used once, as WF
demands of a whole trace, so a reused one is refused.

The edit rules come from the properties they must never break:

* AF (admission floor) — an arrival that `contract.Entitlement` marks floor-entitled is admitted with
  basis ``floor`` whatever the learner said (the edit reject → admit), unless a floor-credit pool shared
  with other replicas refused it (`Request.pool`: its reason is traced); one the pool granted is
  entitled in the pool's order, whatever this replica's own count says. Burst excess of a floored tenant
  follows ``contract.excess``: ``reject`` or ``demote`` (admitted at opportunistic rank, basis
  ``demoted``, if the learner admits it). Unfloored tenants: the learner's ``admit`` decides (basis
  ``surplus``). A proposal that is not a well-typed `Proposal` (a learner that raised or returned
  garbage, see `learners.consult`) counts as a reject, traced as ``learner_error`` (type and message)
  and ``learner-error: <ExceptionType>`` as the reject reason (bounded: reasons become metrics labels);
  ``learner-timeout`` for a late one. `arrive` takes the proposal with the arrival (traced on it);
  `receive` + `decide` ask it after: the contract's own decisions (floor, excess under ``reject``) are
  made at the arrival and only surplus waits for `decide` (its proposal traced on the admit/reject).
  Entitlement counts arrivals.
* SF (service floor) — at most C in flight, non-preemptive; waiting work is
  ranked by `ready.rank`: true tier, floor before surplus, learner hint
  (surplus only, lower first; non-finite: none), arrival. Demoted requests
  rank with the lowest tier; ``dispatch_policy="fifo"`` ranks by arrival.
* RB (reserved buffer, §10) — surplus (any basis but ``floor``) never holds
  more than C − R slots: `_fill`, the one place a slot is taken, offers it
  only below that (`ready.ReadyQueue`); floor work may take all C.
* DR (doom-sound drop) — with ``deferred_drop``, a request is dropped only at
  dispatch time and only when ``now + L(R) > D(R)``. A request that is
  admitted but never dispatched ends with ``fail`` (cancelled, shutdown),
  never with ``drop``. With ``gate_upper`` and a contract U, dispatches with
  ``now + U(R) > D(R)`` are counted as *uncertain* (the three-state gate).
* Watch — with ``watch``, `AssumptionWatch` raises alerts when a precondition
  of SF breaks (`rvguard.enforce.watching`: `drain_alerts` gives them as trace
  records); with ``degrade`` the floor is lowered while it fires (reason
  ``floor-lowered``, a declared lowering recorded in the alert) and restored after.
* RL (physical redline, §10) — with ``redline``, `observe` feeds each
  headroom sample to the redline; while it fires, queued surplus is held
  back (``demote``) and released when it clears (``restore``); floor work,
  running work and anything this core did not admit are never touched
  (`rvguard.enforce.demotion`). Eviction of running surplus, chosen by the
  runtime's channels, goes through the table too (`rvguard.enforce.relief`).
* A user's tables (``gate``, `rvguard.enforce.gate`): asked before a decided admission or a
  dispatch is applied; it may refuse a surplus admission or keep a surplus dispatch queued.
* WF — the lifecycle's moves, one terminal each; those the core never emits
  (a running request dropped, routing, relocation) are listed with the reason
  in `NOT_EMITTED`, and WF still accepts them from other enforcers. A
  request cancelled while it waits for `decide` is rejected (never admitted).

Cost: O(log n) per arrival, dispatch and completion (`ready.ReadyQueue`);
memory O(n) for n live requests plus O(tenants), plus the ended rids
(O(1) for counter rids that end roughly in order, ~100 bytes each otherwise).
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Literal

from ..contract import Contract, Entitlement
from ..errors import EnforcementError, TraceOrderError
from ..events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Dispatch,
    Drop,
    Event,
    EventKind,
    Fail,
    Proposal,
    Reject,
    proposal_record,
)
from ..facts import FactsCache, RequestFacts
from ..lifecycle import COMPLETE, DROP, Stage
from .gate import EventGate
from .learners import reject_reason, traced_proposal, usable_proposal
from .outcome import CoreStatistics as CoreStatistics
from .rationing import ReliefConfig
from .ready import Key, ReadyQueue, rank
from .redline import Redline, RedlineConfig, RedlineReading
from .request import Request
from .rids import SpentRids
from .transitions import ACTIONS as ACTIONS
from .transitions import EDGES, Action
from .transitions import NOT_EMITTED as NOT_EMITTED
from .transitions import TRANSITIONS as TRANSITIONS
from .transitions import derive_transitions as derive_transitions
from .watch import AssumptionWatch, WatchConfig
from .watching import FLOOR_REFUSED, WatchMixin, floor_refusal

__all__ = [
    "ACTIONS",
    "NOT_EMITTED",
    "TRANSITIONS",
    "Action",
    "CoreStatistics",
    "DecisionCore",
    "DispatchPolicy",
    "derive_transitions",
]

DispatchPolicy = Literal["priority", "fifo"]


class _Entry:
    """One live request: its facts, absolute deadline and automaton state."""

    __slots__ = ("basis", "deadline", "dispatched_at", "entitled", "facts", "key", "request", "state")

    def __init__(self, request: Request, facts: RequestFacts, deadline: float):
        self.request = request
        self.facts = facts
        self.deadline = deadline
        self.state = Stage.NEW
        self.basis: Basis | None = None
        self.dispatched_at = 0.0
        self.key: Key = (0, 0, 0.0, 0)
        self.entitled = False  # floor-entitled (even when a lowered floor or the pool refused it)


_REJECT = Proposal(admit=False)
#: the counters `statistics` reports, each kept as the attribute ``_<name>`` (a C integer compiled)
_COUNTERS: tuple[str, ...] = (
    *("arrived", "admitted_floor", "admitted_surplus", "admitted_demoted", "rejected", "dispatched"),
    *("completed", "dropped", "failed", "uncertain", "max_queue_depth", "demoted", "restored", "evicted"),
)


class DecisionCore(WatchMixin):  # WatchMixin → ReliefMixin → DemotionMixin: one chain (mypyc)
    """Admission, dispatch and doom-sound drop for one contract (see module doc).

    Args:
        contract: the assured-SLO contract being enforced.
        dispatch_policy: ``"priority"`` (true tier, then arrival) or ``"fifo"``.
        deferred_drop: drop at dispatch time when ``now + L(R) > D(R)``.
        gate_upper: count dispatches whose ``now + U(R) > D(R)`` as uncertain.
        watch: enable the online assumption watch with this configuration.
        redline: the physical redline's configuration (``None``: no headroom, no demotion).
        staleness: seconds a sample may be old for a demotion to cite it (default: the contract's
            ``headroom.staleness``, else no bound).
        origin: the window origin (default: the contract's epoch).

    Attributes:
        facts: the requests' contract facts by shape (`rvguard.facts.FactsCache`);
            the Guard caps a request's tokens through it before the core sees it.
    """

    def __init__(
        self,
        contract: Contract,
        *,
        dispatch_policy: DispatchPolicy = "priority",
        deferred_drop: bool = False,
        gate_upper: bool = False,
        watch: WatchConfig | None = None,
        redline: RedlineConfig | None = None,
        staleness: float | None = None,
        origin: float | None = None,
    ) -> None:
        if dispatch_policy not in ("priority", "fifo"):
            raise ValueError(f"dispatch_policy must be 'priority' or 'fifo', got {dispatch_policy!r}")
        self.contract = contract
        self.dispatch_policy: DispatchPolicy = dispatch_policy
        self.deferred_drop = deferred_drop
        self.gate_upper = gate_upper
        self._origin = contract.epoch if origin is None else origin
        self._entitlement = Entitlement(contract, origin=self._origin)
        self._watch = None if watch is None else AssumptionWatch(contract, watch, origin=self._origin)
        self._lowest = max(t.tier for t in contract.tenants.values())
        self._demote = contract.excess.value == "demote"
        #: each request's contract facts, by shape (the one cache, `rvguard.facts`)
        self.facts = FactsCache(contract)
        self._live: dict[str, _Entry] = {}
        self._spent = SpentRids()  # every rid that has ended: never admitted again
        self._ready: ReadyQueue[_Entry] = ReadyQueue(lambda e: e.state is Stage.ADMITTED)
        self._surplus_cap = contract.slots - contract.reserve  # RB: surplus holds at most C − R slots
        self._floor_used: dict[str, tuple[int, int]] = {}  # tenant -> (window, credit units on the floor)
        self._now = -math.inf
        self._seq = 0
        self._running = 0
        self._surplus_running = 0
        self._queued = 0
        # the counters `statistics` reports (attributes, not a dict: the compiled build keeps them as
        # C integers; a dict costs a lookup and a store per count)
        self._arrived = self._rejected = self._dispatched = self._completed = self._dropped = 0
        self._failed = self._uncertain = self._max_queue_depth = self._demoted = self._restored = 0
        self._evicted = 0
        self._admitted_floor = self._admitted_surplus = self._admitted_demoted = 0
        self._redline = None if redline is None else Redline(redline)
        block = getattr(contract, "headroom", None)
        self._staleness = (
            staleness if staleness is not None else math.inf if block is None else block.staleness
        )
        self._reading: RedlineReading | None = None
        self._restore_waits = False  # the redline cleared on a stale sample: the held wait for a fresh one
        self._held: dict[str, _Entry] = {}  # demoted: out of the ready queue until restored
        self._ration: ReliefConfig | None = None  # rationed relief (`ration`): restores by allowance
        self._held_at: dict[str, float] = {}  # rid -> when it was held (the hold bound's clock)
        self._ration_cap = 0  # rationed: surplus running allowed while some are held (`_gated`)
        self._restoring: dict[str, _Entry] = {}  # rationed: restored, not dispatched yet
        self.gate: EventGate | None = None  # a user's tables enforced live (module doc)

    # -- public API ------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Requests holding one of the C slots now."""
        return self._running

    @property
    def surplus_in_flight(self) -> int:
        """Surplus (not floor-admitted) requests holding a slot now: at most C − R (RB)."""
        return self._surplus_running

    @property
    def queue_depth(self) -> int:
        """Admitted requests waiting for a slot."""
        return self._queued

    def is_live(self, rid: str) -> bool:
        """True while ``rid`` has no terminal event yet."""
        return rid in self._live

    def protected(self, rid: str) -> bool:
        """True when live ``rid`` is floor-entitled or admitted on the floor: never demoted nor
        preempted (RL, PR), even when a lowered floor or the credit pool admitted it as excess."""
        entry = self._live.get(rid)
        return entry is not None and (entry.entitled or entry.basis is Basis.FLOOR)

    def running_basis(self, rid: str) -> Basis | None:
        """The basis ``rid`` was admitted on while it is in flight, else ``None`` (preemption reads it)."""
        entry = self._live.get(rid)
        running = entry is not None and (entry.state is Stage.DISPATCHED or entry.state is Stage.EVICTED)
        return entry.basis if running and entry is not None else None

    def arrive(
        self, request: Request, proposal: Proposal, now: float, facts: RequestFacts | None = None
    ) -> list[Event]:
        """Decide on an arrival: its Arrive, then Admit or Reject, then any Dispatch now possible.

        ``proposal`` is the learner's, untrusted: anything that is not a
        well-typed `Proposal` is taken as a `LearnerFailure` (see
        `learners.checked_proposal`). ``facts``: the request's, when its caller has them (the
        Guard, which capped the request with them: `entry.BoundRequest`), else read here.

        Raises:
            EnforcementError: unknown tenant (403), a rid seen before, live or
                ended (409), or a deadline before ``now`` or not finite (400).
            TraceOrderError: ``now`` earlier than a previous call's.
        """
        entry = self._entry(request, now, facts)
        proposal = usable_proposal(proposal)
        r, (shown, why) = request, traced_proposal(proposal)
        capped = entry.facts.capped_tokens
        arrive = Arrive(now, r.rid, r.tenant, entry.deadline, r.prompt_tokens, capped, shown, why)
        self._apply(entry, arrive)
        decision = self._by_contract(entry, now) or self._by_learner(entry, proposal, now)
        return self._decided(entry, [arrive], decision, now)

    def receive(self, request: Request, now: float, facts: RequestFacts | None = None) -> list[Event]:
        """Step one (module doc): the Arrive, and the decision when the contract alone makes it.

        Raises:
            EnforcementError, TraceOrderError: as `arrive` (``facts``: as there).
        """
        entry = self._entry(request, now, facts)
        r, capped = request, entry.facts.capped_tokens
        out: list[Event] = [Arrive(now, r.rid, r.tenant, entry.deadline, r.prompt_tokens, capped)]
        self._apply(entry, out[0])
        decision = self._by_contract(entry, now)
        return out if decision is None else self._decided(entry, out, decision, now)

    def decide(self, rid: str, proposal: Proposal, now: float) -> list[Event]:
        """Step two: the learner's answer decides a waiting request (traced on the decision).

        Raises:
            EnforcementError: ``rid`` is not waiting for a decision (state unchanged).
        """
        self._check_time(now)
        entry = self._live.get(rid)
        if entry is None or entry.state is not Stage.ARRIVED:
            raise EnforcementError(f"request {rid!r} is not waiting for a decision", status_hint=409)
        self._advance(now)
        proposal = usable_proposal(proposal)
        decision = self._by_learner(entry, proposal, now)
        shown, why = traced_proposal(proposal)
        traced: dict[str, object] = {"proposal": proposal_record(shown), **why}
        decision = replace(decision, extra=MappingProxyType(traced))
        return self._decided(entry, [], decision, now)

    def awaits_decision(self, rid: str) -> bool:
        """True while ``rid`` was received and waits for `decide`."""
        entry = self._live.get(rid)
        return entry is not None and entry.state is Stage.ARRIVED

    def _decided(self, entry: _Entry, out: list[Event], decision: Admit | Reject, now: float) -> list[Event]:
        if entry.entitled and (decision.kind is not EventKind.ADMIT or entry.basis is not Basis.FLOOR):
            why = floor_refusal(entry.request.pool)  # the trace says why the floor was refused (AF)
            decision = replace(decision, extra=MappingProxyType({**decision.extra, FLOOR_REFUSED: why}))
        if self.gate is not None:  # after the floor's own edit: the gate never refuses an entitled one
            decision = self.gate.admission(out, decision, entry.entitled)
        self._apply(entry, decision)
        out.append(decision)
        if entry.state is Stage.ADMITTED:
            if entry.basis is not Basis.FLOOR and self._holding():
                self._hold_surplus(now, out)  # the redline fires: held before any dispatch
            self._fill(now, out)
        return out

    def finish(self, rid: str, now: float, *, failed: bool = False, reason: str = "") -> list[Event]:
        """A dispatched request completed (or failed): free its slot and dispatch the next.

        Raises:
            EnforcementError: ``rid`` is not in flight (state unchanged).
        """
        self._check_time(now)
        entry = self._live.get(rid)
        if entry is None or entry.state is not Stage.DISPATCHED:
            state = "unknown" if entry is None else entry.state.name
            raise EnforcementError(f"request {rid!r} is not in flight ({state})", status_hint=409)
        self._advance(now)
        ev: Event = Fail(now, rid, reason or "backend") if failed else Complete(now, rid)
        self._apply(entry, ev)
        if not failed and self._watch is not None:
            service = now - entry.dispatched_at
            facts = entry.facts
            self._watch.observe_service(entry.request.tenant, service, facts.weight, now, facts.lower)
        out: list[Event] = [ev]
        self._fill(now, out)
        return out

    def cancel(self, rid: str, now: float, reason: str = "cancelled", **extra: Any) -> list[Event]:
        """End a live request: ``fail`` (queued or in flight), or ``reject`` when it still waits for
        `decide` (it was never admitted); ``extra`` rides on the record; idempotent for finished ones."""
        self._check_time(now)
        entry = self._live.get(rid)
        if entry is None:
            return []
        self._advance(now)
        end = Reject if entry.state is Stage.ARRIVED else Fail
        if end is Reject and entry.entitled:  # it waited because its floor was refused: say why (AF)
            extra = {**extra, FLOOR_REFUSED: floor_refusal(entry.request.pool)}
        out: list[Event] = [end(now, rid, reason, extra)]
        self._apply(entry, out[0])
        self._fill(now, out)
        return out

    def fail_queued(self, now: float, reason: str = "shutdown") -> list[Event]:
        """Fail every request still waiting for a slot, held ones too (shutdown without drain)."""
        self._check_time(now)
        self._advance(now)
        out: list[Event] = []
        waiting = [e for e in self._live.values() if e.state in (Stage.ADMITTED, Stage.HELD)]
        for entry in sorted(waiting, key=lambda e: e.key):
            ev = Fail(now, entry.request.rid, reason)
            self._apply(entry, ev)
            out.append(ev)
        self._ready.clear()
        return out

    def poll(self, now: float) -> list[Event]:
        """Let time pass: window bookkeeping, the watch, and any dispatch now possible."""
        self._check_time(now)
        self._advance(now)
        out: list[Event] = []
        self._fill(now, out)
        return out

    def statistics(self) -> CoreStatistics:
        """The counters now, as a frozen record."""
        counts = {name: getattr(self, f"_{name}") for name in _COUNTERS}
        live = {"in_flight": self._running, "queue_depth": self._queued, "alerts": len(self.alerts)}
        return CoreStatistics(**counts, **live, held=len(self._held), floor_scale=self._floor_scale())

    def _check(self) -> None:
        """Assert the core's invariants (tests call it after every step)."""
        states = [e.state for e in self._live.values()]
        running = [e for e in self._live.values() if e.state in (Stage.DISPATCHED, Stage.EVICTED)]
        assert self._running == len(running) <= self.contract.slots  # an evicted request keeps its slot
        assert self._surplus_running == sum(e.basis is not Basis.FLOOR for e in running) <= self._surplus_cap
        assert self._queued == states.count(Stage.ADMITTED)
        assert set(states) <= {Stage.ARRIVED, Stage.ADMITTED, Stage.HELD, Stage.DISPATCHED, Stage.EVICTED}
        held = [e for e in self._live.values() if e.state is Stage.HELD]
        assert len(held) == len(self._held)
        assert all(e.basis is not Basis.FLOOR for e in held)
        assert self._holding() or not held or self._restore_waits, "requests held while the redline is clear"
        assert not any(self.protected(e.request.rid) for e in held), "a protected request is held"
        floors = self._entitlement.units.floors
        for tenant, (_, used) in self._floor_used.items():
            assert used <= floors[tenant]
        assert sum(1 for _ in self._ready) == self._queued

    # -- decisions -------------------------------------------------------------
    def _check_new(self, request: Request, now: float) -> None:
        """Refuse a rid seen before (live or ended: WF allows one arrive per rid) and a deadline
        before the arrival (or not a number)."""
        rid, deadline = request.rid, request.deadline
        if rid in self._live:
            raise EnforcementError(f"request {rid!r} is already live", status_hint=409)
        if rid in self._spent:
            raise EnforcementError(f"request {rid!r} already ended: a rid is used once", status_hint=409)
        if deadline is not None and not (now <= deadline < math.inf):
            raise EnforcementError(
                f"request {rid!r}: deadline {deadline!r} is not a time at or after its arrival {now!r}",
                status_hint=400,
            )

    def _entry(self, request: Request, now: float, facts: RequestFacts | None) -> _Entry:
        """A new request's entry; raises (nothing changed) if it is refused."""
        self._check_time(now)
        if request.tenant not in self.contract.tenants:
            raise EnforcementError(f"unknown tenant {request.tenant!r}", status_hint=403)
        self._check_new(request, now)
        if facts is None:
            facts = self.facts(request.tenant, request.prompt_tokens, request.max_tokens)
        self._advance(now)
        return _Entry(request, facts, facts.deadline(request.t, request.deadline))

    def _by_contract(self, entry: _Entry, now: float) -> Admit | Reject | None:
        """Count the arrival for entitlement; the decision if the contract alone makes it (else
        ``None``: surplus, or excess under ``demote``, is the learner's to decide)."""
        req, facts = entry.request, entry.facts
        k, entitled, _, _ = self._entitlement.arrive(req.tenant, now, facts.weight_units)
        if not facts.floored:
            entry.entitled = entitled
            return None
        if req.pool == "":  # granted by a shared pool: entitled in the pool's order, not this replica's
            entitled = True
        entry.entitled = entitled
        if entitled and not req.pool and self._floor_room(req.tenant, k, facts.weight_units):  # pool: refused
            return self._admit(entry, Basis.FLOOR, _REJECT, now, k)
        why = req.pool or ("floor-lowered" if entitled else "excess")
        return None if self._demote else Reject(now, req.rid, why)

    def _by_learner(self, entry: _Entry, proposal: Proposal, now: float) -> Admit | Reject:
        """Surplus (or demoted excess) as the learner proposes; a learner reject says why."""
        req = entry.request
        if not proposal.admit:
            return Reject(now, req.rid, reject_reason(proposal))
        basis = Basis.DEMOTED if entry.facts.floored else Basis.SURPLUS
        return self._admit(entry, basis, proposal, now, 0)

    def _admit(self, entry: _Entry, basis: Basis, proposal: Proposal, now: float, k: int) -> Admit:
        """Admit on ``basis``; ``k`` is the arrival's window (from the entitlement count)."""
        seq = self._seq = self._seq + 1
        entry.basis = basis
        if basis is Basis.FLOOR:
            self._spend_floor(entry.request.tenant, k, entry.facts.weight_units)
        tier = self._lowest if basis is Basis.DEMOTED else entry.facts.tier
        surplus, fifo = basis is not Basis.FLOOR, self.dispatch_policy == "fifo"
        entry.key = rank(tier, surplus, proposal.priority_hint, seq, fifo=fifo)
        return Admit(now, entry.request.rid, basis)

    # -- dispatch --------------------------------------------------------------
    def _fill(self, now: float, out: list[Event]) -> None:
        """Dispatch (or doom-drop) while a slot is free; surplus only below C − R running (RB), while
        the redline does not fire (RL), rationed, while none is held (`DemotionMixin._gated`), and
        as a user's tables allow (`EventGate`: what they delay waits for the next fill)."""
        slots, ready, kept = self.contract.slots, self._ready, []
        self._pass_on(now, out)  # rationed: a freed surplus slot goes to the held first
        while self._running < slots:
            entry = ready.pop(surplus_room=self._surplus_running < self._surplus_cap and not self._gated())
            if entry is None:
                break
            rid = entry.request.rid
            facts = entry.facts
            if self.deferred_drop and now + facts.lower > entry.deadline:
                drop = Drop(now, rid, "doomed")
                self._apply(entry, drop)
                out.append(drop)
                continue
            if self.gate_upper and facts.upper is not None and now + facts.upper > entry.deadline:
                self._uncertain += 1
            dispatch = Dispatch(now, rid)
            if self.gate is not None and not self.gate.dispatch(out, dispatch, entry.basis is Basis.FLOOR):
                kept.append(entry)  # a user's table delays it: queued, offered again at the next fill
                continue
            entry.dispatched_at = now
            self._apply(entry, dispatch)
            out.append(dispatch)
        for entry in kept:
            ready.push(entry.key, entry, surplus=True)  # the gate keeps surplus only

    def _take_surplus(self) -> list[_Entry]:
        return self._ready.take_surplus(keep=lambda e: e.entitled)

    # -- the automaton -----------------------------------------------------------
    def _apply(self, entry: _Entry, ev: Event) -> None:
        """Take the edge for ``ev`` from ``entry``'s state; raise (state unchanged) if none."""
        edge = EDGES[entry.state].get(type(ev))
        if edge is None:
            raise EnforcementError(
                f"illegal {ev.kind.value} for {ev.rid!r} in state {entry.state.name}", status_hint=500
            )
        nxt, action = edge
        rid = entry.request.rid
        if action is Action.RECORD:
            self._live[rid] = entry
            self._arrived += 1
        elif action is Action.ENQUEUE:
            self._ready.push(entry.key, entry, surplus=entry.basis is not Basis.FLOOR)
            self._queued += 1
            basis = entry.basis
            self._admitted_floor += basis is Basis.FLOOR
            self._admitted_demoted += basis is Basis.DEMOTED
            self._admitted_surplus += basis is not Basis.FLOOR and basis is not Basis.DEMOTED
            self._max_queue_depth = max(self._max_queue_depth, self._queued)
            self._backlog(entry.facts.floored, 1, ev.t)
        elif action is Action.FORGET:
            del self._live[rid]
            self._spent.add(rid)
            self._rejected += 1
        elif action is Action.TAKE_SLOT:
            self._queued -= 1
            self._running += 1
            self._surplus_running += entry.basis is not Basis.FLOOR
            self._dispatched += 1
        elif action is Action.HOLD or action is Action.UNHOLD:
            self._hold_edge(entry, action is Action.HOLD)
        elif action is Action.EVICT:
            pass  # it keeps its slot until it ends (RELEASE); `evict` counts it
        else:
            self._leave(entry, action, ev)
        entry.state = nxt

    def _hold_edge(self, entry: _Entry, hold: bool) -> None:
        """HOLD: out of the ready queue (`take_surplus` took it); UNHOLD: back, at its own rank."""
        rid = entry.request.rid
        if hold:
            self._queued -= 1
            self._held[rid] = entry
            self._demoted += 1
        else:
            del self._held[rid]
            self._queued += 1
            self._ready.push(entry.key, entry, surplus=True)
            self._restored += 1

    def _leave(self, entry: _Entry, action: Action, ev: Event) -> None:
        """The terminal edges out of ADMITTED (DEQUEUE), HELD (ABANDON) and DISPATCHED (RELEASE)."""
        del self._live[entry.request.rid]
        self._spent.add(entry.request.rid)
        self._backlog(entry.facts.floored, -1, ev.t)
        if action is Action.DEQUEUE:
            self._queued -= 1
            self._ready.compact(self._queued)
        elif action is Action.ABANDON:
            del self._held[entry.request.rid]
        else:
            self._running -= 1
            self._surplus_running -= entry.basis is not Basis.FLOOR
        code = ev.code  # an int: no enum hashed, no dict built per request
        self._completed += code == COMPLETE
        self._dropped += code == DROP
        self._failed += code != COMPLETE and code != DROP

    # -- time ------------------------------------------------------------------
    def _entry_of(self, rid: str) -> _Entry | None:
        return self._live.get(rid)

    def _check_time(self, now: float) -> None:
        if not now >= self._now:
            raise TraceOrderError(f"time went backwards: now={now!r} < {self._now!r}", field="t")

    def _advance(self, now: float) -> None:
        self._now = now
        if self._watch is not None:
            self._watch.tick(now)
