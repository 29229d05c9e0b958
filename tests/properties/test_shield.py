"""The shield: sound (nothing it lets out reaches a bad location), transparent (a compliant event
passes unchanged), each clause's remedy applied at the event that breaks it, and in shadow beside
the decision core it accepts every event the core emits."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.learners import Learner, LoadView, consult
from rvguard.enforce.request import Request
from rvguard.enforce.watch import WatchConfig
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Dispatch,
    Drop,
    Event,
    Evict,
    Fail,
    Proposal,
    Reject,
)
from rvguard.properties import BUILTIN, TableMonitor
from rvguard.properties.shield import Shield
from rvguard.properties.table import CONTROLLABLE
from rvguard.watch_events import FLOOR_REFUSED
from tests.enforce import test_core_stateful as base
from tests.enforce._harness import make_contract
from tests.monitors.strategies import small_contract, wellformed_traces

from ._traces import random_trace

ENFORCED = [BUILTIN[n] for n in ("AF", "DR", "RB", "CAP", "PR")]


def _a(t: float, rid: str, tenant: str = "a", deadline: float | None = None) -> Arrive:
    return Arrive(t, rid, tenant, deadline=deadline, max_tokens=4)


# Each clause broken at the last event of a compliant prefix (small_contract: a floor 2, b floor 1,
# o none; C = 2; R = 1 where asked; W = 1; L = 0.25 + 4/16 = 0.5 at 4 output tokens).
CASES = [
    ("AF", 0, [_a(0, "r0")], Reject(0.1, "r0"), "replace", (Admit(0.1, "r0", Basis.FLOOR),)),
    (
        "AF",
        0,
        [_a(0, "r0", "b"), _a(0, "r1", "b"), Admit(0, "r0", Basis.FLOOR)],
        Admit(0.1, "r1", Basis.FLOOR),
        "replace",
        (Admit(0.1, "r1", Basis.SURPLUS),),
    ),
    ("DR", 0, [_a(0, "r0", "o", 2.0), Admit(0, "r0")], Drop(0.5, "r0", "doomed"), "suppress", ()),
    (
        "RB",
        1,
        [_a(0, "r0", "o"), _a(0, "r1", "o"), Admit(0, "r0"), Admit(0, "r1"), Dispatch(0, "r0")],
        Dispatch(0.1, "r1"),
        "delay",
        (),
    ),
    (
        "CAP",
        0,
        [
            *(_a(0, f"r{i}") for i in range(3)),
            *(Admit(0, f"r{i}", Basis.FLOOR) for i in range(2)),
            Admit(0, "r2", Basis.SURPLUS),
            Dispatch(0, "r0"),
            Dispatch(0, "r1"),
        ],
        Dispatch(0.1, "r2"),
        "delay",
        (),
    ),
    (
        "PR",
        0,
        [_a(0, "r0"), Admit(0, "r0", Basis.FLOOR), Dispatch(0, "r0")],
        Evict(0.1, "r0", 0, "e"),
        "suppress",
        (),
    ),
    (
        "PR",
        0,
        [_a(0, "r0"), Admit(0, "r0", Basis.FLOOR), Dispatch(0, "r0")],
        Fail(0.1, "r0", "preempted"),
        "suppress",
        (),
    ),
]


@pytest.mark.parametrize(("name", "reserve", "prefix", "bad", "action", "emitted"), CASES)
def test_each_clause_caught_and_remedied(
    name: str, reserve: int, prefix: list[Event], bad: Event, action: str, emitted: tuple[Event, ...]
) -> None:
    contract = small_contract(reserve=reserve)
    table = BUILTIN[name]
    monitor = TableMonitor(contract, [table])
    assert monitor.feed_all(prefix) == []  # compliant so far
    (v,) = monitor.feed(bad)
    assert (v.property, v.rid, v.t, v.witness[-1]) == (name, bad.rid, bad.t, bad)
    assert "[" in v.detail and v.context["guard"]  # the guard as written
    shield = Shield(contract, [table])
    for ev in prefix:
        d = shield.decide(ev)
        assert d.passed and d.events == (ev,)  # transparent
    d = shield.decide(bad)
    assert (d.action, d.events, d.property) == (action, emitted, name)
    assert shield.violations == []


def _emitted(contract: Contract, trace: list[Event]) -> list[Event]:
    shield = Shield(contract, ENFORCED)
    out: list[Event] = []
    for ev in trace:
        out += shield.decide(ev).events
    return out


@given(st.sampled_from([0, 1]), wellformed_traces(runbook=True))
def test_sound_nothing_let_out_reaches_bad(reserve: int, trace: list[Event]) -> None:
    """Whatever the trace offered, the events the shield lets out reach no bad location of an
    enforced table by a controllable event (a suppressed request's later completion is the world's
    event, which WF then refuses: that is not the shield's emission)."""
    contract = small_contract(reserve=reserve)
    monitor = TableMonitor(contract, ENFORCED)
    found = monitor.feed_all(_emitted(contract, trace))
    assert [v for v in found if v.witness[-1].kind in CONTROLLABLE] == []


def test_sound_seeded_batch() -> None:
    rng = random.Random(11)
    offered = 0
    for i in range(600):
        contract = small_contract(reserve=i % 2)
        trace = random_trace(rng, steps=30, odd=0.0)
        offered += len(TableMonitor(contract, ENFORCED).feed_all(trace))
        found = TableMonitor(contract, ENFORCED).feed_all(_emitted(contract, trace))
        assert [v for v in found if v.witness[-1].kind in CONTROLLABLE] == []
    assert offered > 100  # the offered traces did break the tables


def test_shadow_commits_what_was_emitted_and_reports_the_disagreement() -> None:
    contract = small_contract()
    shield = Shield(contract, ENFORCED)
    shield.decide(_a(0, "r0"))
    d = shield.decide(Reject(0.1, "r0"), shadow=True)
    assert d.action == "replace" and d.property == "AF"
    assert shield.violations and shield.violations[0].property == "AF"  # the miss is recorded
    assert shield.decide(Complete(0.2, "r0")).passed  # r0 is done: the reject was committed


#: a shared floor-credit pool's refusals (`Request.pool`): the core grants no floor and traces why
POOL_REFUSALS = st.sampled_from(["pool-exhausted", "floor-lowered", "pool-unreachable"])


class ShadowMachine(base.CoreMachine):
    """The core's stateful test, with the shield beside the core: every event the core emits must
    pass the shield unchanged, and no table may see a violation. The strategy adds what the core
    refuses the floor for by declaration: a shared pool's refusals (`arrive_refused`) and a floor
    lowered while the assumption watch fires (``degrade``: a backlog above the floors or a service
    above its ceiling fires it, ``sustain`` 1); AF's table takes those as its declared exceptions."""

    def setup(self, degrade: float | None = None, **kwargs: object) -> None:  # type: ignore[override]
        super().setup(**kwargs)  # type: ignore[arg-type]
        if degrade is not None:
            self.core = DecisionCore(
                self.contract,
                dispatch_policy=kwargs["policy"],  # type: ignore[arg-type]
                deferred_drop=bool(kwargs["drop"]),
                watch=WatchConfig(sustain=1, degrade=degrade),
            )
        self.shield = Shield(self.contract, ENFORCED)

    @base.rule(
        dt=st.sampled_from([0.0, 0.05, 0.3]),
        tenant=st.sampled_from(["assured", "assured", "opp"]),
        why=POOL_REFUSALS,
        learner=base.learners,
    )
    def arrive_refused(self, dt: float, tenant: str, why: str, learner: Learner) -> None:
        """An arrival whose floor credit a shared pool refused (the pool's verdict on the request)."""
        self.now += dt
        self.n += 1
        req = Request(f"r{self.n}", tenant, self.now, max_tokens=8, pool=why)
        view = LoadView(self.now, self.core.in_flight, self.core.queue_depth, self.contract.slots)
        self._take(self.core.arrive(req, consult(learner, req, view), self.now))

    def _take(self, events: list[Event]) -> None:
        if getattr(self, "closing", False):  # the harness's shutdown: PR reports the entitled work it
            super()._take(events)  # ends (a guard-caused end), the shield does not prevent a shutdown
            return
        for ev in events:
            d = self.shield.decide(ev)
            assert d.passed and d.events == (ev,), (ev, d)
        assert self.shield.violations == []
        super()._take(events)

    def teardown(self) -> None:
        self.closing = True
        super().teardown()


@pytest.mark.parametrize(("excess", "basis"), [("reject", None), ("demote", Basis.DEMOTED)])
def test_shadow_accepts_the_cores_declared_lowering(excess: str, basis: Basis | None) -> None:
    """The stateful test's floor lowering, pinned: a service above its ceiling fires the watch, the
    core lowers the floor (``degrade`` 0) and refuses the next entitled arrivals their floor, rejected
    or admitted as demoted with ``floor_refused: floor-lowered``; AF's table takes each as its
    declared exception, so the shield passes every core event unchanged and sees no violation."""
    contract = make_contract(slots=1, floor=2, excess=excess, lower=0.0, s_max=0.5)
    core = DecisionCore(contract, watch=WatchConfig(sustain=1, degrade=0.0))
    shield = Shield(contract, ENFORCED)
    events = core.arrive(Request("a0", "assured", 0.0), Proposal(), 0.0) + core.finish("a0", 0.9)
    for i in (1, 2):  # entitled: two credits in the window of t = 1.x
        events += core.arrive(Request(f"a{i}", "assured", 1.0 + i / 10), Proposal(), 1.0 + i / 10)
    refused = [e for e in events if getattr(e, "extra", {}).get(FLOOR_REFUSED) == "floor-lowered"]
    assert [(e.rid, e.kind.value, getattr(e, "basis", None)) for e in refused] == [
        (f"a{i}", "reject" if basis is None else "admit", basis) for i in (1, 2)
    ]
    for ev in events:
        d = shield.decide(ev)
        assert d.passed and d.events == (ev,), (ev, d)
    assert shield.violations == []


_SETUP = base.CoreMachine.setup.hypothesis_stateful_initialize_rule.arguments  # type: ignore[attr-defined]
ShadowMachine.setup = base.initialize(**_SETUP, degrade=st.sampled_from([None, 0.5, 0.0]))(  # type: ignore[method-assign]
    ShadowMachine.setup
)
TestShadowBesideTheCore = ShadowMachine.TestCase
