"""Hypothesis stateful test: any arrivals, learner and headroom signal, the core with its redline
and bare preemption (or rationed relief) never breaks AF, DR, WF, RL or PR.

The headroom signal is adversarial: any value in [0, 1], glitches to 0, samples repeated with the
same timestamp (duplicates), older ones sent again (stale), jittered times, a resource the
redline does not know (refused, nothing changes), and long silences. The learner proposes
anything, rejections included. Past the hard floor every running surplus request is noticed for
preemption (`Preemption`, with a random grace) and stopped when due, as the Guard's loop does.
A channel's eviction is drawn too (`DecisionCore.evict`: running surplus leaves its engine and
stays evicted, holding its slot, until its stop; floor work and what is not running are refused,
state unchanged).

After every step: the core's `_check()` (nothing held while the redline is clear, held requests
surplus and unprotected only), the online `Monitor` finding no AF, DR, WF, RB, RL or PR
violation (a reserve R is drawn too; the redline is the contract's headroom block), and RL and
PR read again from the trace by the plain checkers below (written from DESIGN §10, not from the
core): every ``demote`` cites a resource and a sample time that a ``sample`` event already
traced, at most ``staleness`` old; only a queued, unentitled request this core admitted as
surplus (or demoted excess) is demoted, and only a held one restored; no surplus is dispatched
while the redline fires; a ``fail`` with reason ``preempted`` only for a
running surplus request; one terminal event per request. At teardown everything ends, each
request exactly once. After every step, too, the core's own record (each live request's stage,
every counter) equals the trace replayed by `test_relief_record`'s table.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.eviction import Candidate
from rvguard.enforce.preemption import PREEMPTED, Preemption
from rvguard.enforce.rationing import ReliefConfig, preempt_fewest
from rvguard.enforce.redline import HeadroomSample, redline_config
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, TelemetryFormatError
from rvguard.events import (
    HOLD_BOUND,
    Admit,
    Arrive,
    Basis,
    Demote,
    Dispatch,
    Drop,
    Event,
    Fail,
    Proposal,
    Restore,
    Sample,
)
from rvguard.monitors import Monitor
from rvguard.verdict import Violation

from ._harness import check_af, check_dr, check_wf, entitled_rids, make_contract, terminal_counts
from .test_relief_record import agree, replay

RESOURCES = ("kv_cache", "seqs")
CAPACITY = 4000  # rationed relief's KV tokens


def check_rl(trace: list[Event], entitled: set[str], staleness: float) -> list[str]:
    """RL by a plain reading of the trace (DESIGN §10): a fresh sample cited (traced before, at most
    ``staleness`` old), scope (queued surplus, never an entitled request), held/restored."""
    bad: list[str] = []
    sampled: set[tuple[str, float]] = set()
    basis: dict[str, Basis] = {}
    stage: dict[str, str] = {}
    for ev in trace:
        if isinstance(ev, Sample):
            sampled.add((ev.resource, ev.sample_time))
            continue
        if isinstance(ev, Admit):
            basis[ev.rid] = ev.basis
        if isinstance(ev, Demote):
            if (ev.resource, ev.sample_time) not in sampled or ev.t - ev.sample_time > staleness:
                bad.append(f"{ev.rid}: demoted at {ev.t} on {ev.resource}@{ev.sample_time}, not fresh")
            if ev.rid in entitled:
                bad.append(f"{ev.rid}: floor-entitled, demoted")
            if basis.get(ev.rid) not in (Basis.SURPLUS, Basis.DEMOTED) or stage.get(ev.rid) != "queued":
                bad.append(f"{ev.rid}: demoted as {basis.get(ev.rid)} while {stage.get(ev.rid)}")
        if isinstance(ev, Restore) and stage.get(ev.rid) != "held":
            bad.append(f"{ev.rid}: restored while {stage.get(ev.rid)}")
        stage[ev.rid] = {"admit": "queued", "restore": "queued", "demote": "held", "dispatch": "running"}.get(
            ev.kind.value, "ended" if ev.kind.value in ("complete", "fail", "drop", "reject") else "arrived"
        )
    return bad


def check_pr(trace: list[Event], entitled: set[str]) -> list[str]:
    """PR: preempted only if admitted surplus/demoted, not entitled, and running; never two terminals."""
    bad, basis, running = [], {}, set()
    for ev in trace:
        if isinstance(ev, Admit):
            basis[ev.rid] = ev.basis
        elif isinstance(ev, Dispatch):
            running.add(ev.rid)
        elif (
            isinstance(ev, Fail)
            and ev.reason == PREEMPTED
            and not (basis.get(ev.rid) in (Basis.SURPLUS, Basis.DEMOTED) and ev.rid in running)
        ):
            bad.append(f"{ev.rid}: preempted as {basis.get(ev.rid)}")
    return bad + [f"{r}: {n} terminal events" for r, n in terminal_counts(trace).items() if n > 1]


values = st.one_of(st.floats(0.0, 1.0), st.just(0.0), st.just(1.0), st.sampled_from([0.05, 0.15, 0.25, 0.35]))


class RedlineCoreMachine(RuleBasedStateMachine):
    """One DecisionCore with a redline, preemption on the hard floor, driven arbitrarily."""

    contract: Contract
    core: DecisionCore
    monitor: Monitor
    pre: Preemption

    def __init__(self) -> None:
        super().__init__()
        self.trace: list[Event] = []
        self.now = 0.0
        self.n = 0
        self.sample_t = dict.fromkeys(RESOURCES, -math.inf)  # each resource's last fresh sample time
        self.basis: dict[str, Basis] = {}
        self.pooled: set[str] = set()  # entitled arrivals a shared pool refused (admitted as excess)
        self.arrived: dict[int, int] = {}  # the assured tenant's arrivals, per window
        self.prompts: dict[str, int] = {}

    @initialize(
        slots=st.integers(1, 3),
        floor=st.integers(0, 3),
        excess=st.sampled_from(["reject", "demote", "demote"]),
        reserve=st.integers(0, 1),
        drop=st.booleans(),
        both=st.booleans(),
        h_min=st.sampled_from([0.1, 0.2, 0.4]),
        margin=st.sampled_from([0.0, 0.05, 0.2]),
        alpha=st.sampled_from([0.1, 0.5, 1.0]),
        horizon=st.sampled_from([0.0, 30.0]),
        dwell=st.integers(1, 3),
        grace=st.sampled_from([0.0, 0.5]),
        staleness=st.sampled_from([1e6, 5.0, 40.0]),
        hold_bound=st.sampled_from([None, None, 1.0, 30.0]),
    )
    def setup(self, slots: int, floor: int, excess: str, reserve: int, drop: bool, both: bool, h_min: float,
              margin: float, alpha: float, horizon: float, dwell: int, grace: float,
              staleness: float, hold_bound: float | None) -> None:  # fmt: skip
        base = make_contract(slots=slots, floor=floor, excess=excess, reserve=min(reserve, slots - 1))
        resources: dict[str, dict[str, float]] = {
            "kv_cache": {"h_min": h_min, "margin": margin, "hard_floor": h_min / 2}
        }
        if both:
            resources["seqs"] = {"h_min": 0.3, "margin": 0.1}
        block = {
            "alpha": alpha,
            "horizon": horizon,
            "dwell": dwell,
            "staleness": staleness,
            "resources": resources,
        }
        self.contract = Contract.model_validate({**base.model_dump(), "headroom": block})
        assert self.contract.headroom is not None
        config = redline_config(self.contract.headroom)  # the core reads staleness from the block
        self.core = DecisionCore(self.contract, deferred_drop=drop, redline=config)
        self.relief = None if hold_bound is None else ReliefConfig(CAPACITY, hold_bound=hold_bound)
        if self.relief is not None:  # rationed relief: the fewest preempted, restores by allowance
            self.core.ration(self.relief)
        self.staleness = staleness
        self.pre = Preemption(self.core, grace=grace, retry_after=1.0)
        self.monitor = Monitor(self.contract, properties=("AF", "DR", "WF", "RB", "RL", "PR"))

    def _take(self, events: list[Event]) -> None:
        firing = self.core.redline is not None and self.core.redline.firing
        for ev in events:
            self.trace.append(ev)
            assert self._undeclared(self.monitor.feed(ev)) == [], ev
            if isinstance(ev, Admit) and "floor_refused" in ev.extra:  # AF's declared exception: why
                assert ev.rid in self.pooled and ev.extra["floor_refused"] == "pool-refused"
            if isinstance(ev, Admit):
                self.basis[ev.rid] = ev.basis
            if isinstance(ev, Dispatch):
                assert not (firing and self.basis[ev.rid] is not Basis.FLOOR), f"surplus {ev.rid} dispatched"
            if ev.kind.value in ("complete", "fail", "drop", "reject"):
                self.pre.forget(ev.rid)

    def _running(self) -> list[str]:
        return [r for r in self.basis if self.core.running_basis(r) is not None]

    def _in(self, stage: str) -> list[str]:
        """The requests the trace (replayed by the test's own table) leaves in ``stage``."""
        return [rid for rid, where in replay(self.trace)[0].items() if where == stage]

    @rule(dt=st.sampled_from([0.0, 0.1, 0.5, 10.0]), tenant=st.sampled_from(["assured", "assured", "opp"]),
          admit=st.booleans(), hint=st.none() | st.floats(-5, 5),
          pool=st.sampled_from([None, None, "", "pool-refused"]), prompt=st.integers(0, 400))  # fmt: skip
    def arrive(
        self, dt: float, tenant: str, admit: bool, hint: float | None, pool: str | None, prompt: int
    ) -> None:
        """An arrival; ``pool`` is a shared credit pool's verdict. A refusal makes an entitled request
        excess: under ``demote`` (and a learner that admits it, so AF holds on this one trace) it is
        admitted at surplus rank and must stay protected (never demoted nor preempted)."""
        if pool == "pool-refused":
            if self.contract.excess.value != "demote":
                pool = None
            admit = True
        self.now += dt
        self.n += 1
        if tenant == "assured":  # a pool's grant here comes in this replica's own order (one replica:
            k = self.contract.window_index(self.now)  # tests/fleet/test_pool_order.py has the others)
            self.arrived[k] = self.arrived.get(k, 0) + 1
            if pool == "" and self.arrived[k] > self.contract.tenants["assured"].floor:
                pool = None
        if pool == "pool-refused" and tenant == "assured":
            self.pooled.add(f"r{self.n}")
        self.prompts[f"r{self.n}"] = prompt
        req = Request(f"r{self.n}", tenant, self.now, None, prompt, pool=pool)
        self._take(self.core.arrive(req, Proposal(admit=admit, priority_hint=hint), self.now))

    @rule(
        data=st.data(),
        resource=st.sampled_from(RESOURCES),
        value=values,
        dt=st.sampled_from([0.0, 0.2, 1.0]),
        how=st.sampled_from(["fresh", "fresh", "fresh", "duplicate", "stale", "jittered"]),
    )
    def sample(self, data: st.DataObject, resource: str, value: float, dt: float, how: str) -> None:
        self.now += dt
        last = self.sample_t[resource]
        base = 0.0 if last == -math.inf else last
        t = {"fresh": base + 15.0, "duplicate": base, "stale": base - 15.0}.get(how, base + 14.8)
        if how == "jittered":
            t += data.draw(st.floats(0.0, 0.4))
        known = resource in {r.name for r in self.core.redline.config.resources}  # type: ignore[union-attr]
        before = self.core.statistics()
        try:
            events = self.core.observe(HeadroomSample(resource, value, t), self.now)
        except TelemetryFormatError:
            assert not known and self.core.statistics() == before
            return
        assert known
        if how in ("duplicate", "stale") and t <= last:
            assert events == []
        if t > last:
            self.sample_t[resource] = t
        self._take(events)
        self._past_the_hard_floor()

    def _past_the_hard_floor(self) -> None:
        """As the Guard's loop does: notice every running surplus request while it is crossed, or,
        rationed, the fewest the planner picks (each request's state: its prompt, drawn)."""
        crossing = self.core.hard_floor_crossed()
        if crossing is None:
            return
        rids = [rid for rid in self._running() if self.pre.preemptible(rid)]
        if self.relief is not None:
            cands = [Candidate(rid, self.prompts.get(rid, 0), 0) for rid in rids]
            plan = preempt_fewest(cands, headroom=crossing.smoothed, floor=crossing.floor, capacity=CAPACITY)
            assert set(plan) <= set(rids)
            rids = list(plan)
        for rid in rids:
            self.pre.notice(rid, self.now)

    @precondition(lambda self: getattr(self, "relief", None) is not None)
    @rule(dt=st.sampled_from([0.0, 0.5, 2.0, 40.0]))
    def expire_held(self, dt: float) -> None:
        """Rationed: the held past the bound are answered ``hold-bound``; then, as `expire_held` says,
        the surplus queued behind them dispatches as slots allow (the last held gone, nothing else
        may come to wake it), and nothing else happens. (This rule once allowed the fails alone: a
        run whose expiry freed the gate for a queued request stopped here, the dispatch never fed to
        the monitor, and the teardown's completion of that request read as a WF break.)"""
        self.now += dt
        held_since = {e.rid: e.t for e in self.trace if isinstance(e, Demote)}
        events = self.core.expire_held(self.now)
        assert self.relief is not None
        fails = [ev for ev in events if isinstance(ev, Fail)]
        assert events[: len(fails)] == fails, events  # the answers first, then what the fill does
        for ev in fails:
            assert ev.reason == HOLD_BOUND
            assert self.now - held_since[ev.rid] >= self.relief.hold_bound
        assert all(isinstance(ev, (Dispatch, Drop)) for ev in events[len(fails) :]), events
        self._take(events)

    @rule(
        resource=st.sampled_from(RESOURCES), value=st.sampled_from([0.0, 0.1, 0.9, 1.0]), n=st.integers(1, 6)
    )
    def settle(self, resource: str, value: float, n: int) -> None:
        """Several fresh samples at one level: the redline decisively fires, or clears."""
        if resource not in {r.name for r in self.core.redline.config.resources}:  # type: ignore[union-attr]
            return
        for _ in range(n):
            self.sample_t[resource] = max(self.sample_t[resource], 0.0) + 15.0
            self.now += 0.1
            self._take(self.core.observe(HeadroomSample(resource, value, self.sample_t[resource]), self.now))
        self._past_the_hard_floor()

    @precondition(lambda self: bool(self.pre.pending))
    @rule(dt=st.sampled_from([0.0, 0.3, 1.0]))
    def stop_due(self, dt: float) -> None:
        self.now += dt
        for rid in self.pre.due(self.now):
            self._take(self.pre.stop(rid, self.now))

    @rule(data=st.data(), reason=st.sampled_from(["emergency", "voluntary"]), state=st.integers(0, 500))
    def evict(self, data: st.DataObject, reason: str, state: int) -> None:
        """A channel's choice, carried out by the core: running surplus leaves its engine (evicted,
        keeping its slot) and is noticed, so a later `stop_due` ends it ``preempted``; the core
        refuses floor work and what is not running, state unchanged."""
        rid = data.draw(st.sampled_from([*self._in("dispatched"), *self._in("evicted"), "never-seen"]))
        before = self.core.statistics()
        if not self.pre.preemptible(rid) or rid not in self._in("dispatched"):
            with pytest.raises(EnforcementError):
                self.core.evict(rid, self.now, state, reason)
            assert self.core.statistics() == before
            return
        self._take(self.core.evict(rid, self.now, state, reason))
        self.pre.notice(rid, self.now)

    @rule(data=st.data(), dt=st.sampled_from([0.0, 0.1, 0.6]), failed=st.booleans())
    def finish(self, data: st.DataObject, dt: float, failed: bool) -> None:
        running = self._in("dispatched")  # an evicted request's late answer does not end it
        if not running:
            return
        self.now += dt
        self._take(self.core.finish(data.draw(st.sampled_from(running)), self.now, failed=failed))

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        live = [r for r in self.basis if self.core.is_live(r)] + ["never-seen"]
        self._take(self.core.cancel(data.draw(st.sampled_from(live)), self.now))

    @rule(dt=st.sampled_from([0.1, 1.0, 60.0]))
    def poll(self, dt: float) -> None:
        self.now += dt
        self._take(self.core.poll(self.now))

    @invariant()
    def holds(self) -> None:
        if not hasattr(self, "core"):
            return
        self.core._check()
        entitled = entitled_rids(self.contract, [e for e in self.trace if e.rid])
        assert check_rl(self.trace, entitled, self.staleness) == []
        assert check_pr([e for e in self.trace if e.rid], entitled) == []
        demoted = {e.rid for e in self.trace if isinstance(e, Demote)}
        bounded = {e.rid for e in self.trace if isinstance(e, Fail) and e.reason == HOLD_BOUND}
        assert bounded <= demoted - entitled, "hold-bound ends only held, unentitled surplus"
        agree(self.core, self.trace)  # the core's record is what its trace says, evictions included

    def _recover(self) -> None:
        """Feed fresh healthy samples until the redline stops firing and no request is held (a
        bounded number of rounds). Not firing is not enough: rationed relief restores held work by
        the allowance the smoothed headroom gives, and while one request is held no surplus is
        dispatched, so a stop at the first clear sample left work queued beside a free slot (a
        held request waiting for allowance, and an entitled one demoted by a pool refusal behind
        it), which the shutdown then failed."""
        redline = self.core.redline
        for _ in range(200):
            if redline is None or (not redline.firing and not self.core.held):
                return
            for resource in [r.name for r in redline.config.resources]:
                last = self.sample_t[resource]
                self.sample_t[resource] = t = (0.0 if last == -math.inf else last) + 15.0
                self._take(self.core.observe(HeadroomSample(resource, 1.0, t), self.now))

    def teardown(self) -> None:
        if not hasattr(self, "core"):
            return
        self.now += 1.0
        self._recover()  # a drain: healthy telemetry releases held work, which runs as slots free
        for rid in self._in("evicted"):  # their stops: each ends ``preempted``
            self._take(self.pre.stop(rid, self.now))
        while self._running():
            for rid in self._running():
                self._take(self.core.finish(rid, self.now))
        self._take(self.core.fail_queued(self.now))  # nothing is left: PR judges a shutdown's every end
        requests = [e for e in self.trace if e.rid]
        arrived = {e.rid for e in requests if isinstance(e, Arrive)}
        assert terminal_counts(requests) == dict.fromkeys(arrived, 1)
        assert check_wf(requests) == []
        # the harness's AF wants basis floor; a pool's refusal is judged fleet-wide (the online AF passed)
        assert [v for v in check_af(self.contract, requests) if v.split(":")[0] not in self.pooled] == []
        assert check_dr(self.contract, requests) == []
        entitled = entitled_rids(self.contract, requests)
        assert check_rl(self.trace, entitled, self.staleness) == [] and check_pr(requests, entitled) == []
        assert self._undeclared(self.monitor.violations()) == []
        assert not math.isnan(self.now)

    def _undeclared(self, found: list[Violation]) -> list[Violation]:
        """The violations but AF's on a pool-refused entitled request: admitted as demoted with the
        pool's reason recorded, `rvguard check` reports it as a declared exception."""
        return [v for v in found if not (v.property == "AF" and v.rid in self.pooled)]


TestRedlineCoreMachine = RedlineCoreMachine.TestCase
TestRedlineCoreMachine.settings = settings(
    max_examples=150, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class _Draws:
    """Stands in for hypothesis's ``data`` object: hands out recorded draws in order."""

    def __init__(self, *values: object) -> None:
        self.values = list(values)

    def draw(self, strategy: object) -> object:
        return self.values.pop(0)


def _shrunk_machine(*, floor: int, reserve: int) -> RedlineCoreMachine:
    """The machine as both shrunk runs below set it up: one slot, rationed relief, a 0.1 redline."""
    state = RedlineCoreMachine()
    state.setup(slots=1, floor=floor, excess="demote", reserve=reserve, drop=False, both=False,
                h_min=0.1, margin=0.0, alpha=0.1, horizon=0.0, dwell=1, grace=0.0, staleness=5.0,
                hold_bound=1.0)  # fmt: skip
    return state


def test_a_shutdown_after_recovery_fails_nothing_entitled() -> None:
    """Found by the machine on a clean clone (shrunk): a request held for lack of allowance gates
    every surplus request, so the teardown's drain must go on until none is held; before, it stopped
    at the first clear sample and the shutdown failed an entitled request demoted by a pool refusal
    (a PR violation). The steps as the machine ran them, then its teardown's checks."""
    state = _shrunk_machine(floor=1, reserve=0)
    state.settle(n=1, resource="kv_cache", value=0.0)
    state.arrive(admit=False, dt=0.0, hint=None, pool=None, prompt=0, tenant="assured")
    state.arrive(admit=False, dt=0.0, hint=None, pool="pool-refused", prompt=0, tenant="assured")
    state.poll(dt=60.0)
    state.arrive(admit=True, dt=0.0, hint=None, pool=None, prompt=0, tenant="opp")
    state.arrive(admit=False, dt=0.0, hint=None, pool="pool-refused", prompt=0, tenant="assured")
    state.teardown()
    shutdown = [e.rid for e in state.trace if isinstance(e, Fail) and e.reason == "shutdown"]
    assert shutdown == []  # drained: everything dispatched and completed


def test_the_expiry_of_the_last_held_request_dispatches_the_surplus_behind_it() -> None:
    """Found by the machine (shrunk, its steps below as it ran them; the cancels of requests never
    seen change nothing): `expire_held` fails the held past the bound and then fills the freed slot;
    the rule that allowed the fails alone stopped there, so that dispatch never reached the monitor
    and the request's completion read as a WF break."""
    state = _shrunk_machine(floor=0, reserve=1)
    state.settle(n=1, resource="kv_cache", value=0.0)
    state.arrive(admit=False, dt=0.0, hint=None, pool=None, prompt=0, tenant="assured")
    state.arrive(admit=False, dt=0.0, hint=None, pool="pool-refused", prompt=0, tenant="assured")
    state.cancel(data=_Draws("r2"))  # type: ignore[arg-type]
    state.poll(dt=60.0)
    state.arrive(admit=True, dt=0.0, hint=None, pool=None, prompt=0, tenant="opp")
    state.cancel(data=_Draws("r3"))  # type: ignore[arg-type]
    state.settle(n=2, resource="kv_cache", value=0.0)
    state.sample(data=_Draws(), dt=0.0, how="fresh", resource="kv_cache", value=0.0)  # type: ignore[arg-type]
    state.arrive(admit=True, dt=0.0, hint=None, pool=None, prompt=0, tenant="assured")
    state.cancel(data=_Draws("r4"))  # type: ignore[arg-type]
    state.arrive(admit=False, dt=0.0, hint=None, pool=None, prompt=0, tenant="opp")
    state.arrive(admit=False, dt=0.0, hint=None, pool="pool-refused", prompt=0, tenant="assured")  # held
    state.arrive(admit=True, dt=10.0, hint=0.0, pool=None, prompt=0, tenant="opp")  # queued behind it
    state.sample(data=_Draws(), dt=0.0, how="fresh", resource="kv_cache", value=1.0)  # type: ignore[arg-type]
    before = len(state.trace)
    state.expire_held(dt=0.0)
    kinds = [(e.kind.value, e.rid) for e in state.trace[before:]]
    assert kinds == [("fail", "r6"), ("dispatch", "r7")], kinds
    state.teardown()
