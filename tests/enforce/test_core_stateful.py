"""Hypothesis stateful test: any arrivals, any learner, any reserve, the core never breaks AF, DR, WF, RB.

Adversarial learners are part of the strategy: random proposals, always
reject, hint flooding (huge, infinite and NaN hints), proposals claiming
the assured class, learners that raise and learners that return something
ill-typed (None, a dict, a Proposal with a str admit or hint), asked through
`consult` as every driver does, and late ones (`LearnerTimeout`). Arrivals come one-step
(`arrive`) or two-step as the Guard makes them (`receive`, then `decide` or a cancel while
waiting). After every step: the core's own `_check()`, at most C in
flight and at most C − R of them surplus, floor credits within B per window,
at most one terminal per request, and the online `Monitor` (plus the
brute-force checker) finding no AF, DR, WF or RB violation. At teardown
everything is finished, so every arrived request has exactly one terminal event.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.learners import Learner, LearnerTimeout, LoadView, consult
from rvguard.enforce.request import Request
from rvguard.events import Admit, Arrive, Basis, Dispatch, Event, Proposal
from rvguard.monitors import Monitor
from rvguard.watch_events import FLOOR_REFUSED

from ._harness import check_af, check_dr, check_rb, check_wf, make_contract, terminal_counts

proposals = st.one_of(
    st.builds(Proposal, st.booleans(), st.none(), st.none() | st.floats(-10, 10)),  # random
    st.just(Proposal(admit=False)),  # always reject
    st.builds(  # hint flooding
        Proposal,
        st.booleans(),
        st.none(),
        st.sampled_from([-1e308, -float("inf"), float("inf"), float("nan"), 1e308]),
    ),
    st.builds(Proposal, st.booleans(), st.sampled_from(["assured", "floor", "tier0"]), st.just(-1e9)),
)
_GARBAGE: list[object] = [None, True, "admit", {"admit": True}, Proposal(admit="yes"), Proposal(admit=1)]  # type: ignore[arg-type]
_GARBAGE += [Proposal(priority_hint="0"), Proposal(objective=7), Proposal(priority_hint=True)]  # type: ignore[arg-type]
_GARBAGE += [Proposal(priority_hint=10**400)]
ill_typed = st.sampled_from(_GARBAGE)
errors = st.sampled_from([ValueError("bad"), ZeroDivisionError(), RuntimeError("x" * 500), KeyError("k")])


@dataclass(frozen=True)
class Fixed:
    """A learner that answers ``value`` whatever it is asked (ill-typed on purpose)."""

    value: object

    def propose(self, request: Request, view: LoadView) -> Proposal:
        return self.value  # type: ignore[return-value]


@dataclass(frozen=True)
class Raising:
    """A learner that raises."""

    error: Exception

    def propose(self, request: Request, view: LoadView) -> Proposal:
        raise self.error


LATE = LearnerTimeout(reason="timeout: no answer within 0.1 s")
learners = st.one_of(st.builds(Fixed, proposals | ill_typed), st.builds(Raising, errors))


class CoreMachine(RuleBasedStateMachine):
    """Drives one DecisionCore with arbitrary interleavings and checks it as it goes."""

    contract: Contract
    core: DecisionCore
    monitor: Monitor

    def __init__(self) -> None:
        super().__init__()
        self.trace: list[Event] = []
        self.now = 0.0
        self.n = 0
        self.running: list[str] = []
        self.queued: set[str] = set()
        self.waiting: set[str] = set()  # received, waiting for decide (two-step arrivals)
        #: entitled requests whose floor was refused by declaration (a pool's refusal or a declared
        #: lowering: the decision's ``floor_refused``); AF's declared exceptions, empty unless a
        #: subclass's strategy makes them (tests/properties/test_shield.py)
        self.declared: set[str] = set()

    @initialize(
        slots=st.integers(1, 3),
        floor=st.integers(0, 4),
        excess=st.sampled_from(["reject", "demote"]),
        policy=st.sampled_from(["priority", "fifo"]),
        drop=st.booleans(),
        lower=st.sampled_from([0.0, 0.1, 0.4]),
        credit=st.sampled_from(["count", "tokens"]),
        reserve=st.integers(0, 3),
    )
    def setup(
        self,
        slots: int,
        floor: int,
        excess: str,
        policy: str,
        drop: bool,
        lower: float,
        credit: str,
        reserve: int,
    ) -> None:
        b = floor if credit == "count" else floor * 40  # token credits: w = capped max_tokens (≤ 48)
        r = min(reserve, slots)
        self.contract = make_contract(
            slots=slots, floor=b, excess=excess, lower=lower, s_max=0.5, credit=credit, reserve=r
        )
        self.core = DecisionCore(self.contract, dispatch_policy=policy, deferred_drop=drop)  # type: ignore[arg-type]
        self.monitor = Monitor(self.contract, properties=("AF", "DR", "WF", "RB"))

    def _take(self, events: list[Event]) -> None:
        for ev in events:
            self.trace.append(ev)
            if FLOOR_REFUSED in getattr(ev, "extra", {}):
                self.declared.add(ev.rid)
            assert [v for v in self.monitor.feed(ev) if v.rid not in self.declared] == [], ev
            if not isinstance(ev, Arrive):
                self.waiting.discard(ev.rid)
            if isinstance(ev, Admit):
                self.queued.add(ev.rid)
            elif isinstance(ev, Dispatch):
                self.queued.discard(ev.rid)
                self.running.append(ev.rid)
            elif ev.kind.value in ("complete", "fail", "drop"):
                self.queued.discard(ev.rid)
                if ev.rid in self.running:
                    self.running.remove(ev.rid)

    @rule(
        dt=st.sampled_from([0.0, 0.0, 0.05, 0.3, 1.0]),
        tenant=st.sampled_from(["assured", "assured", "opp"]),
        learner=learners,
        max_tokens=st.none() | st.integers(0, 500),
        slack=st.none() | st.floats(0.0, 3.0),
    )
    def arrive(
        self, dt: float, tenant: str, learner: Learner, max_tokens: int | None, slack: float | None
    ) -> None:
        self.now += dt
        self.n += 1
        deadline = None if slack is None else self.now + slack
        req = Request(f"r{self.n}", tenant, self.now, deadline=deadline, max_tokens=max_tokens)
        view = LoadView(self.now, self.core.in_flight, self.core.queue_depth, self.contract.slots)
        self._take(self.core.arrive(req, consult(learner, req, view), self.now))

    @rule(
        dt=st.sampled_from([0.0, 0.05, 0.3]),
        tenant=st.sampled_from(["assured", "assured", "opp"]),
        max_tokens=st.none() | st.integers(0, 500),
    )
    def receive(self, dt: float, tenant: str, max_tokens: int | None) -> None:
        """The Guard's two-step arrival: the learner asked later, only if its answer matters."""
        self.now += dt
        self.n += 1
        rid = f"r{self.n}"
        events = self.core.receive(Request(rid, tenant, self.now, max_tokens=max_tokens), self.now)
        if len(events) == 1:
            self.waiting.add(rid)
        assert self.core.awaits_decision(rid) == (len(events) == 1)
        self._take(events)

    @precondition(lambda self: bool(self.waiting))
    @rule(data=st.data(), dt=st.sampled_from([0.0, 0.1]), learner=learners | st.just(Fixed(LATE)))
    def decide(self, data: st.DataObject, dt: float, learner: Learner) -> None:
        self.now += dt
        rid = data.draw(st.sampled_from(sorted(self.waiting)))
        view = LoadView(self.now, self.core.in_flight, self.core.queue_depth, self.contract.slots)
        req = Request(rid, "opp", self.now)
        self._take(self.core.decide(rid, consult(learner, req, view), self.now))

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data(), dt=st.sampled_from([0.0, 0.1, 0.6]), failed=st.booleans())
    def finish(self, data: st.DataObject, dt: float, failed: bool) -> None:
        self.now += dt
        rid = data.draw(st.sampled_from(self.running))
        self._take(self.core.finish(rid, self.now, failed=failed, reason="boom"))

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        live = sorted(self.queued) + self.running + sorted(self.waiting) + ["never-seen"]
        self._take(self.core.cancel(data.draw(st.sampled_from(live)), self.now))

    @rule(dt=st.sampled_from([0.1, 1.0]))
    def poll(self, dt: float) -> None:
        self.now += dt
        self._take(self.core.poll(self.now))

    @invariant()
    def core_invariants(self) -> None:
        if not hasattr(self, "core"):
            return
        self.core._check()
        assert self.core.in_flight <= self.contract.slots
        assert self.core.surplus_in_flight <= self.contract.slots - self.contract.reserve
        assert all(n == 1 for n in terminal_counts(self.trace).values())
        used: dict[tuple[str, int], float] = defaultdict(float)
        arrive = {e.rid: e for e in self.trace if isinstance(e, Arrive)}
        for ev in self.trace:
            if isinstance(ev, Admit) and ev.basis is Basis.FLOOR:
                a = arrive[ev.rid]
                used[a.tenant, self.contract.window_index(a.t)] += self.contract.weight(
                    a.prompt_tokens, a.max_tokens
                )
        assert all(u <= self.contract.tenants[tn].floor for (tn, _), u in used.items())

    def teardown(self) -> None:
        if not hasattr(self, "core"):
            return
        self.now += 1.0
        for rid in sorted(self.waiting):
            self._take(self.core.cancel(rid, self.now, "shutdown"))  # never admitted: a reject
        self._take(self.core.fail_queued(self.now))
        while self.running:
            self._take(self.core.finish(self.running[0], self.now))
        arrived = {e.rid for e in self.trace if isinstance(e, Arrive)}
        assert terminal_counts(self.trace) == dict.fromkeys(arrived, 1)
        assert check_wf(self.trace) == []
        assert [m for m in check_af(self.contract, self.trace) if m.split(":")[0] not in self.declared] == []
        assert check_dr(self.contract, self.trace) == []
        assert check_rb(self.contract, self.trace) == []
        assert [v for v in self.monitor.violations() if v.rid not in self.declared] == []


TestCoreMachine = CoreMachine.TestCase
TestCoreMachine.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
