"""Relief under memory pressure, simulated with the real core: preempt-all against rationing.

Theory of operation
-------------------
Closed-loop clients (`PressureModel`: surplus ones, and a few of the first floored tenant) send a
request, wait for its end and send the next; a request the guard ended (preempted, held past its
bound, rejected) is retried after ``retry_after`` seconds, as an SDK's automatic retry does. The
engine is `rvguard.sim.memory.KVCache`: KV grows with the tokens generated. Time moves in ticks;
at each tick, in this order: the engine generates and what finished completes (`finish`), the
clients due send (`arrive`), every ``interval`` the headroom is sampled into the core's redline
(`observe`) and, past the hard floor, relief acts; rationed, a request held ``hold_bound`` seconds
is answered (`expire_held`).

Four relief policies, all carried out by the same `DecisionCore` and the same `Preemption` the
Guard uses (`rvguard.enforce.preemption`: floor work is refused there, so PR holds by construction):

* ``preempt-all`` — bare preemption as it was: past the hard floor every running surplus request
  is stopped, and the redline restores every held request when it clears;
* ``ration`` — `rvguard.enforce.rationing`: past the hard floor the fewest (S descending) whose
  states cover the shortfall, counting stops no sample has measured yet; held surplus restored as
  the headroom allows; a request held past ``hold_bound`` answered ``fail(hold-bound)``;
* ``emergency`` — the Guard's own emergency eviction channel (`rvguard.enforce.emergency`, over
  `_Host`, the runtime it acts through): past the hard floor the planner evicts running surplus by
  the runbook's ranking (S descending, then rid) while the credited headroom is below the target,
  at most k in flight; each eviction is the core's ``evict`` and, in the same step, its stop
  (``fail(preempted)``); its relief is credited until a later sample lands it;
* ``voluntary`` — ``emergency`` and the voluntary channel (`rvguard.enforce.voluntary`): on every
  sample, the crossover rule evicts a running surplus request whose expected remaining seconds
  times the opportunity rate exceed the cost of moving it.

The contract is judged as written, so it needs a ``headroom`` block naming ``kv_cache``;
`relief_contract` adds the default one (`DEFAULT_LIMIT`) to a contract without, and for the two
eviction policies an ``eviction`` block with the cache's size and a target (`DEFAULT_K`, the
limit's ``h_min``) and, for ``voluntary``, the crossover prices (`default_prices`).

Deterministic (no randomness: the clients' first sends are staggered by a fixed step). Cost:
O(ticks · running) plus the core's own per event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..clock import ManualClock
from ..contract import Contract
from ..enforce.core import DecisionCore
from ..enforce.emergency import EmergencyChannel
from ..enforce.eviction import Candidate, eviction_config, voluntary_config
from ..enforce.preemption import Preemption
from ..enforce.rationing import DEFAULT_HOLD_BOUND, InFlight, ReliefConfig, preempt_fewest
from ..enforce.redline import HardFloorCrossing, HeadroomSample, redline_config
from ..enforce.request import Request
from ..enforce.voluntary import VoluntaryChannel
from ..enforce.watch import DEFAULT_WATCH
from ..errors import SpecError
from ..events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Event,
    Evict,
    Fail,
    Proposal,
    Reject,
    Restore,
)
from ..runbook_spec import EvictionSpec, HeadroomSpec, ResourceSpec, VoluntarySpec
from .memory import KVCache, PressureModel

__all__ = [
    "DEFAULT_K",
    "DEFAULT_LIMIT",
    "EVICTING",
    "RELIEF_POLICIES",
    "RESOURCE",
    "ReliefRun",
    "default_prices",
    "relief_contract",
    "run_relief",
]

RESOURCE = "kv_cache"
#: the policies that evict through the Guard's eviction channels
EVICTING: tuple[str, ...] = ("emergency", "voluntary")
RELIEF_POLICIES: tuple[str, ...] = ("ration", "preempt-all", *EVICTING)
#: the redline a contract without a ``headroom`` block is given for a pressure run
DEFAULT_LIMIT = ResourceSpec(h_min=0.35, margin=0.1, hard_floor=0.15)
#: evictions in flight at most, for an eviction policy on a contract that states no channel
DEFAULT_K = 2
_ADMIT = Proposal(admit=True)


def default_prices(model: PressureModel, fixed: float | None = None) -> VoluntarySpec:
    """The crossover prices an eviction run is given when its contract states none: a second of a
    slot costs 1, moving a request costs ``fixed`` (default: half a request's uninterrupted
    service) and nothing per token, and a token takes ``1 / token_rate`` s. So a request is evicted
    voluntarily while more than ``fixed`` seconds of its output remain."""
    cost = model.service / 2 if fixed is None else fixed
    return VoluntarySpec(opportunity_rate=1.0, fixed=cost, token_seconds=1.0 / model.token_rate)


def relief_contract(
    contract: Contract,
    *,
    policy: str = "ration",
    model: PressureModel | None = None,
    alpha: float = 0.5,
    staleness: float = 5.0,
) -> Contract:
    """``contract`` with a ``headroom`` block naming `RESOURCE` (its own, else `DEFAULT_LIMIT` with
    ``alpha`` and ``staleness``) and an ``eviction`` block (its own, else ``k = 1``: EV's bound; the
    run preempts, it never evicts), so that RL and EV judge the run against what it enforced. For
    an eviction policy (`EVICTING`) the block states the channel too: its own, else ``k`` =
    `DEFAULT_K` (or its own ``k``), ``capacity`` the ``model``'s cache and ``target`` the limit's
    ``h_min``; and for ``voluntary`` the prices, its own else `default_prices`."""
    update: dict[str, object] = {}
    block = contract.headroom
    limit = DEFAULT_LIMIT
    if block is None or RESOURCE not in block.resources:
        update["headroom"] = HeadroomSpec(
            alpha=alpha, staleness=staleness, resources={RESOURCE: DEFAULT_LIMIT}
        )
    else:
        limit = block.resources[RESOURCE]
    eviction = contract.eviction
    if policy in EVICTING:
        m = model or PressureModel(capacity=2000)
        m = replace(m, output_tokens=min(m.output_tokens, contract.output_cap))  # the guard caps it
        eviction = _channel(eviction, policy == "voluntary", m, limit)
    elif eviction is None:
        eviction = EvictionSpec(k=1)
    if eviction is not contract.eviction:
        update["eviction"] = eviction
    return contract.model_copy(update=update) if update else contract


def _channel(
    block: EvictionSpec | None, voluntary: bool, model: PressureModel, limit: ResourceSpec
) -> EvictionSpec:
    """An ``eviction`` block that states the emergency channel (and the voluntary one if asked)."""
    base = block if block is not None else EvictionSpec(k=DEFAULT_K)
    update: dict[str, object] = {}
    if base.capacity is None:
        update |= {"capacity": model.capacity, "target": limit.h_min}
    if voluntary and base.voluntary is None:
        update["voluntary"] = default_prices(model)
    return base.model_copy(update=update) if update or block is None else base


@dataclass(frozen=True, slots=True)
class ReliefRun:
    """One pressure run: its trace and what it shows.

    Attributes:
        events: the trace (DESIGN §2 and §10 records).
        completed: surplus requests completed.
        preempted: surplus requests preempted.
        bounded: requests answered at the hold bound.
        evicted: requests evicted (``evict`` records) by the eviction policies; each is also
            counted in ``preempted`` (its stop).
        max_held: the longest a request stayed held, seconds (0: none was).
        sustainable: surplus completions the engine holds above ``h_min`` over the run
            (`PressureModel.sustainable`, less the floored clients' share, × duration / service).
        ceiling: the same above the hard floor (no relief policy completes more without the cache
            crossing it).
    """

    events: tuple[Event, ...]
    completed: int
    preempted: int
    bounded: int
    max_held: float
    sustainable: float
    ceiling: float
    evicted: int = 0


class _Host:
    """The runtime the Guard's eviction channels act through (`rvguard.enforce.host.ReliefHost`),
    over one simulated run: an eviction is the core's ``evict`` and, in the same step, the stop
    that ends it ``fail(preempted)``, as `Guard.evict_now` does them."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self.clock = ManualClock()

    def running(self) -> list[str]:
        return list(self._run.running)

    def request(self, rid: str) -> Request | None:
        return self._run.requests.get(rid)

    def preempt(self, rid: str, *, grace: float | None = None, resource: str = "") -> float:
        run, now = self._run, self.clock.now()
        run.preemption.notice(rid, now, grace=0.0, resource=resource)
        run.emit(run.preemption.stop(rid, now), now)
        return run.preemption.retry_after

    def evict_now(self, rid: str, state: int, reason: str, **decided: Any) -> bool:
        run, now = self._run, self.clock.now()
        run.preemption.notice(rid, now, grace=0.0)
        events = run.core.evict(rid, now, state, reason, **decided)
        if not events:  # a user's table forbade it (never here: the run has none)
            run.preemption.forget(rid)
            return False
        run.emit(events, now)
        run.emit(run.preemption.stop(rid, now), now)
        return True

    def observe_headroom(self, sample: HeadroomSample) -> None:
        now = self.clock.now()
        self._run.emit(self._run.core.observe(sample, now), now)

    def deliver(self, events: list[Event]) -> None:
        self._run.emit(events, self.clock.now())


class _Run:
    """One run's state (module doc)."""

    def __init__(self, contract: Contract, model: PressureModel, policy: str, relief: ReliefConfig) -> None:
        assert contract.headroom is not None
        self.model, self.policy = model, policy
        self.core = DecisionCore(contract, watch=DEFAULT_WATCH, redline=redline_config(contract.headroom))
        if policy == "ration":
            self.core.ration(relief)
        self.capacity = relief.capacity
        self.preemption = Preemption(self.core)
        self.kv = KVCache(model.capacity, model.token_rate)
        self.trace: list[Event] = []
        surplus = [n for n, t in contract.tenants.items() if not t.floored]
        floored = list(contract.floored_tenants)
        if not surplus or (model.assured_clients and not floored):
            raise SpecError(
                "a pressure run needs an unfloored tenant (and a floored one for assured clients)"
            )
        self.tenants = [surplus[0]] * model.clients + [floored[0] if floored else ""] * model.assured_clients
        self.next_at = [i * model.tick for i in range(len(self.tenants))]  # staggered first sends
        self.sent = [0] * len(self.tenants)
        self.owner: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self.running: dict[str, None] = {}  # dispatch order
        self.requests: dict[str, Request] = {}  # live requests (the eviction channels read them)
        self.relieving = InFlight()
        self.host = _Host(self)
        self.emergency: EmergencyChannel | None = None
        self.voluntary: VoluntaryChannel | None = None
        config = eviction_config(contract.eviction)
        if policy in EVICTING and config is not None:
            self.emergency = EmergencyChannel(
                self.host, config, core=self.core, preemption=self.preemption, now=0.0
            )
            prices = voluntary_config(contract.eviction)
            if policy == "voluntary" and prices is not None:
                self.voluntary = VoluntaryChannel(self.host, self.emergency, prices, core=self.core)

    def emit(self, events: Sequence[Event], now: float) -> None:
        """Trace ``events`` (and the watch's alerts); start, stop and reschedule what they say."""
        for ev in [*events, *self.core.drain_alerts()]:
            self.trace.append(ev)
            if isinstance(ev, Arrive):
                self.sizes[ev.rid] = ev.max_tokens or 1
            elif isinstance(ev, Dispatch):
                self.running[ev.rid] = None
                self.kv.start(ev.rid, self.model.prompt_tokens, self.sizes[ev.rid])
            elif isinstance(ev, Complete | Fail | Reject):
                self.running.pop(ev.rid, None)
                self.requests.pop(ev.rid, None)
                self.kv.stop(ev.rid)
                client = self.owner.pop(ev.rid)
                self.next_at[client] = now if isinstance(ev, Complete) else now + self.model.retry_after

    def send(self, now: float) -> None:
        """Every client due sends its next request."""
        for client, due in enumerate(self.next_at):
            if due <= now and now < self.model.duration:
                rid = f"c{client}-{self.sent[client]}"
                self.sent[client] += 1
                self.owner[rid] = client
                self.next_at[client] = float("inf")  # until this one ends
                m = self.model
                request = Request(rid, self.tenants[client], now, None, m.prompt_tokens, m.output_tokens)
                self.requests[rid] = request
                self.emit(self.core.arrive(request, _ADMIT, now), now)

    def sample(self, now: float) -> None:
        """Feed the headroom now to the redline; past the hard floor, relieve."""
        growth = self.kv.growth if self.policy == "ration" else None
        self.emit(self.core.observe(HeadroomSample(RESOURCE, self.kv.headroom, now), now, growth=growth), now)
        crossing = self.core.hard_floor_crossed()
        if self.emergency is not None:
            self._evict(self.emergency, crossing, now)
        elif crossing is not None:
            rids = self._fewest(crossing) if self.policy == "ration" else list(self.running)
            for rid in rids:
                if self.preemption.preemptible(rid):
                    self.preemption.notice(rid, now, resource=crossing.resource)
                    self.emit(self.preemption.stop(rid, now), now)

    def _evict(self, channel: EmergencyChannel, crossing: HardFloorCrossing | None, now: float) -> None:
        """The Guard's eviction channels on this sample, as its headroom loop runs them: each
        running request's S reported, landed relief uncredited, then the emergency channel past
        the hard floor and the voluntary one on every sample."""
        self.host.clock.set(now)
        for rid in self.running:
            channel.progress(rid, self.kv.generated(rid))
        channel.land()
        if crossing is not None:
            channel.act(crossing, now)
        if self.voluntary is not None:
            self.voluntary.act(now)

    def _fewest(self, crossing: HardFloorCrossing) -> tuple[str, ...]:
        redline = self.core.redline
        assert redline is not None
        self.relieving.land(redline.last_sample_time)
        now = redline.last_sample_time(crossing.resource)
        cands = [
            Candidate(rid, self.model.prompt_tokens, self.kv.generated(rid))
            for rid in self.running
            if self.preemption.preemptible(rid)
        ]
        plan = preempt_fewest(
            cands,
            headroom=crossing.smoothed,
            floor=crossing.floor,
            capacity=self.capacity,
            in_flight=self.relieving.tokens,
        )
        states = {c.rid: c.state for c in cands}
        for rid in plan:
            self.relieving.add(rid, crossing.resource, states[rid], now)
        return plan

    def run(self) -> None:
        m = self.model
        every = max(1, round(m.interval / m.tick))
        for i in range(round(m.duration / m.tick) + 1):
            now = i * m.tick
            for rid in self.kv.step(m.tick) if i else []:
                self.emit(self.core.finish(rid, now), now)
            self.send(now)
            if i % every == 0:
                self.sample(now)
            if self.policy == "ration":
                self.emit(self.core.expire_held(now), now)


def _surplus_rids(events: Sequence[Event]) -> set[str]:
    return {ev.rid for ev in events if isinstance(ev, Admit) and ev.basis is not Basis.FLOOR}


def _max_held(events: Sequence[Event]) -> float:
    since: dict[str, float] = {}
    longest = 0.0
    for ev in events:
        if isinstance(ev, Demote):
            since[ev.rid] = ev.t
        elif isinstance(ev, Restore | Fail) and ev.rid in since:
            longest = max(longest, ev.t - since.pop(ev.rid))
    return longest


def run_relief(
    contract: Contract,
    model: PressureModel,
    *,
    policy: str = "ration",
    hold_bound: float = DEFAULT_HOLD_BOUND,
) -> ReliefRun:
    """Simulate ``model`` under ``policy`` (`RELIEF_POLICIES`) against ``relief_contract(contract)``.

    Raises:
        SpecError: an unknown policy, or a contract without an unfloored tenant.
    """
    if policy not in RELIEF_POLICIES:
        raise SpecError(f"unknown relief policy {policy!r}: choose from {', '.join(RELIEF_POLICIES)}")
    contract = relief_contract(contract, policy=policy, model=model)
    model = replace(model, output_tokens=min(model.output_tokens, contract.output_cap))  # the guard caps it
    run = _Run(contract, model, policy, ReliefConfig(model.capacity, hold_bound))
    run.run()
    events = tuple(run.trace)
    surplus = _surplus_rids(events)
    done = sum(1 for ev in events if isinstance(ev, Complete) and ev.rid in surplus)
    stopped = sum(1 for ev in events if isinstance(ev, Fail) and ev.reason == "preempted")
    bounded = sum(1 for ev in events if isinstance(ev, Fail) and ev.reason == "hold-bound")
    assert contract.headroom is not None
    limit = contract.headroom.resources[RESOURCE]
    waves = model.duration / model.service
    level, ceiling = (
        max(0, model.sustainable(h) - model.assured_clients) * waves for h in (limit.h_min, limit.hard_floor)
    )
    evicted = sum(1 for ev in events if isinstance(ev, Evict))
    return ReliefRun(events, done, stopped, bounded, _max_held(events), level, ceiling, evicted)
