"""The eviction planner against an independent oracle: a tick-by-tick simulation of the link.

The oracle never calls the planner's helpers: it ranks by repeated maximum,
tracks its own bucket level and in-flight set, and finds when relief lands by
stepping time in ticks of ``DT`` (so it is exact up to one tick per eviction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rvguard.enforce.eviction import (
    Candidate,
    CrossoverCost,
    EvictionConfig,
    EvictionPlanner,
    LinkBucket,
    crossover,
    rank,
)
from rvguard.errors import SpecError

DT = 1 / 32


# -- the oracle ------------------------------------------------------------------
def _oracle_rank(cands: list[Candidate], skip: set[str]) -> list[Candidate]:
    """Repeatedly take the largest state (smallest rid on a tie) among the unprotected."""
    pool = [c for c in cands if not c.protected and c.rid not in skip]
    out = []
    while pool:
        best = pool[0]
        for c in pool[1:]:
            if c.state > best.state or (c.state == best.state and c.rid < best.rid):
                best = c
        out.append(best)
        pool.remove(best)
    return out


@dataclass
class Oracle:
    k: int
    capacity: int
    target: float
    overhead: float
    rate: float
    burst: float
    level: float
    t: float = 0.0
    flight: dict[str, tuple[int, float]] = field(default_factory=dict)  # rid -> (state, lands)

    def refill(self, now: float) -> None:
        if now > self.t:
            self.level = min(self.burst, self.level + self.rate * (now - self.t))
            self.t = now

    def allowed(self, state: int) -> bool:
        return self.level >= state or self.level >= self.burst

    def short(self, headroom: float, more: list[Candidate]) -> float:
        """Tokens missing to the target (the planner's contract counts credit in tokens)."""
        held = sum(s for s, _ in self.flight.values()) + sum(c.state for c in more)
        return self.target * self.capacity - headroom * self.capacity - held

    def duration(self, state: int) -> float:
        return self.overhead + state / self.rate

    def emergency(self, now: float, headroom: float, cands: list[Candidate]) -> tuple[list[str], int, float]:
        self.refill(now)
        ranked = _oracle_rank(cands, set(self.flight))
        needed: list[Candidate] = []
        for c in ranked:
            if self.short(headroom, needed) <= 0:
                break
            needed.append(c)
        issued = []
        for c in needed:
            if len(self.flight) >= self.k or not self.allowed(c.state):
                break
            self.level -= c.state
            self.flight[c.rid] = (c.state, now + self.duration(c.state))
            issued.append(c.rid)
        waiting = needed[len(issued) :]
        lands = math.inf if self.short(headroom, waiting) > 0 else self._ticks(now, waiting)
        return issued, len(needed), lands

    def _ticks(self, now: float, waiting: list[Candidate]) -> float:
        """Step time by DT: a channel frees when its eviction lands; the next waiting one starts
        on a free channel at the first tick its charge is in the bucket."""
        busy = [lands for _, lands in self.flight.values()]
        level, t, last = self.level, now, max([now, *busy])
        queue = list(waiting)
        while queue:
            busy = [b for b in busy if b > t]
            while queue and len(busy) < self.k and (level >= queue[0].state or level >= self.burst):
                c = queue.pop(0)
                level -= c.state
                busy.append(t + self.duration(c.state))
                last = max(last, busy[-1])
            t += DT
            level = min(self.burst, level + self.rate * DT)
        return last


# -- strategies --------------------------------------------------------------------
def candidates() -> st.SearchStrategy[list[Candidate]]:
    one = st.builds(
        Candidate,
        rid=st.sampled_from([f"r{i}" for i in range(12)]),
        prompt_tokens=st.integers(0, 40),
        generated=st.integers(0, 24),
        protected=st.booleans(),
    )
    return st.lists(one, max_size=10, unique_by=lambda c: c.rid)


configs = st.builds(
    EvictionConfig,
    k=st.integers(1, 4),
    capacity=st.sampled_from([64, 128, 256]),
    target=st.sampled_from([0.1, 0.25, 0.5, 0.9]),
    overhead=st.sampled_from([0.0, 0.125, 0.5, 2.0]),
    link_rate=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    link_burst=st.sampled_from([16.0, 32.0, 64.0, 128.0]),
)


def _oracle_for(cfg: EvictionConfig) -> Oracle:
    return Oracle(
        cfg.k, cfg.capacity, cfg.target, cfg.overhead, cfg.link_rate, cfg.link_burst, cfg.link_burst
    )


# -- properties ----------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(cfg=configs, cands=candidates(), headroom=st.floats(0.0, 1.0), deadline=st.floats(0.0, 400.0))
def test_one_emergency_plan_matches_the_oracle(
    cfg: EvictionConfig, cands: list[Candidate], headroom: float, deadline: float
) -> None:
    plan = EvictionPlanner(cfg).emergency(0.0, headroom, cands, deadline=deadline)
    issued, needed, lands = _oracle_for(cfg).emergency(0.0, headroom, cands)
    assert [e.rid for e in plan.evict] == issued
    assert plan.needed == needed
    if math.isinf(lands):
        assert math.isinf(plan.lands_at)
        assert "cannot bring" in plan.warning
    else:
        assert plan.lands_at <= lands + 1e-9
        assert lands <= plan.lands_at + (needed + 1) * DT + 1e-9
        assert (plan.lands_at > deadline) == bool(plan.warning)


class Emergencies(RuleBasedStateMachine):
    """Emergency and voluntary calls, landings and time, against the oracle after every step."""

    @initialize(cfg=configs)
    def start(self, cfg: EvictionConfig) -> None:
        self.cfg, self.planner, self.oracle = cfg, EvictionPlanner(cfg), _oracle_for(cfg)
        self.now = 0.0

    @rule(dt=st.sampled_from([0.0, 0.25, 1.0, 8.0]))
    def wait(self, dt: float) -> None:
        self.now += dt

    @rule(cands=candidates(), headroom=st.floats(0.0, 1.0))
    def emergency(self, cands: list[Candidate], headroom: float) -> None:
        before = self.planner.credited(headroom) * self.cfg.capacity
        plan = self.planner.emergency(self.now, headroom, cands)
        issued, needed, _ = self.oracle.emergency(self.now, headroom, cands)
        assert [e.rid for e in plan.evict] == issued
        assert plan.needed == needed
        protected = {c.rid for c in cands if c.protected}
        credited = before
        for e in plan.evict:  # EV: none protected, none issued once the credit reaches the target
            assert e.rid not in protected
            assert credited < self.cfg.target * self.cfg.capacity
            credited += e.state

    @rule(c=candidates(), remaining=st.floats(0.0, 50.0), fixed=st.sampled_from([0.0, 1.0, 10.0]))
    def voluntary(self, c: list[Candidate], remaining: float, fixed: float) -> None:
        if not c:
            return
        cost = CrossoverCost(opportunity_rate=1.0, fixed=fixed, per_token=0.25)
        got = self.planner.voluntary(self.now, c[0], cost, remaining)
        o = self.oracle
        o.refill(self.now)
        keep, move = remaining * 1.0, fixed + 0.25 * c[0].state
        want = not c[0].protected and c[0].rid not in o.flight and keep > move
        want = want and len(o.flight) < o.k and o.allowed(c[0].state)
        assert (got is not None) == want
        if want:
            o.level -= c[0].state
            o.flight[c[0].rid] = (c[0].state, self.now + o.duration(c[0].state))

    @rule(data=st.data())
    def land(self, data: st.DataObject) -> None:
        if not self.oracle.flight:
            return
        rid = data.draw(st.sampled_from(sorted(self.oracle.flight)))
        assert self.planner.landed(rid).rid == rid
        del self.oracle.flight[rid]

    @invariant()
    def agree(self) -> None:
        if not hasattr(self, "planner"):
            return
        self.planner._check()
        assert {e.rid for e in self.planner.in_flight} == set(self.oracle.flight)
        assert len(self.oracle.flight) <= self.cfg.k
        self.oracle.refill(self.now)
        assert self.planner.link.level(self.now) == pytest.approx(self.oracle.level, abs=1e-6)


TestEmergencies = Emergencies.TestCase
TestEmergencies.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)


# -- examples ------------------------------------------------------------------------
def test_credited_headroom_stops_a_redundant_eviction() -> None:
    planner = EvictionPlanner(EvictionConfig(k=4, capacity=100, target=0.5))
    big = [Candidate("a", 30, 10), Candidate("b", 20, 0), Candidate("c", 5, 0)]
    first = planner.emergency(0.0, 0.2, big)
    assert [e.rid for e in first.evict] == ["a"]  # 0.2 + 0.4 reaches 0.5
    again = planner.emergency(1.0, 0.2, big)  # the measured headroom has not moved yet
    assert again.evict == ()
    assert again.credited == pytest.approx(0.6)
    planner.landed("a")
    assert [e.rid for e in planner.emergency(2.0, 0.2, big[1:]).evict] == ["b", "c"]


def test_protected_requests_are_never_candidates() -> None:
    cands = [Candidate("assured", 500, 0, protected=True), Candidate("s", 1, 0)]
    assert [c.rid for c in rank(cands)] == ["s"]
    plan = EvictionPlanner(EvictionConfig(k=2, capacity=100, target=0.9)).emergency(0.0, 0.0, cands)
    assert [e.rid for e in plan.evict] == ["s"]
    assert "cannot bring" in plan.warning


def test_at_most_k_in_flight_and_the_serialized_relief_misses_the_deadline() -> None:
    cfg = EvictionConfig(k=1, capacity=100, target=0.9, overhead=2.0)
    cands = [Candidate(f"r{i}", 20, 0) for i in range(5)]
    plan = EvictionPlanner(cfg).emergency(0.0, 0.1, cands, deadline=5.0)
    assert len(plan.evict) == 1
    assert plan.needed == 4
    assert plan.lands_at == pytest.approx(8.0)  # four serialized overheads
    assert "after the node's deadline" in plan.warning
    wide = EvictionPlanner(EvictionConfig(k=4, capacity=100, target=0.9, overhead=2.0))
    assert wide.emergency(0.0, 0.1, cands, deadline=5.0).warning == ""


def test_the_link_bucket_delays_the_next_eviction_and_reports_link_headroom() -> None:
    cfg = EvictionConfig(k=4, capacity=100, target=0.5, link_rate=10.0, link_burst=30.0)
    planner = EvictionPlanner(cfg)
    plan = planner.emergency(0.0, 0.0, [Candidate("a", 25, 0), Candidate("b", 25, 0)])
    assert [e.rid for e in plan.evict] == ["a"]  # 5 tokens left: b waits 2 s for its 25
    assert planner.link.headroom(0.0) == pytest.approx(5 / 30)
    assert plan.lands_at == pytest.approx(2.0 + 2.5)
    assert [e.rid for e in planner.emergency(2.0, 0.0, [Candidate("b", 25, 0)]).evict] == ["b"]


def test_a_state_larger_than_the_bucket_moves_alone_from_a_full_bucket() -> None:
    bucket = LinkBucket(rate=1.0, burst=10.0)
    assert bucket.ready_at(50, 0.0) == 0.0
    bucket.take(50, 0.0)
    assert bucket.headroom(0.0) == 0.0
    assert bucket.ready_at(50, 0.0) == pytest.approx(50.0)  # the debt, then a full bucket


def test_crossover_is_strict() -> None:
    cost = CrossoverCost(opportunity_rate=2.0, fixed=4.0, per_token=0.5)
    assert not crossover(cost, 4, 3.0)  # 6 == 4 + 2: keep
    assert crossover(cost, 4, 3.5)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"k": 0}, "k"),
        ({"capacity": 0}, "capacity"),
        ({"target": 0.0}, "target"),
        ({"target": 1.5}, "target"),
        ({"overhead": -1.0}, "overhead"),
        ({"link_rate": 0.0}, "link_rate"),
        ({"link_burst": -1.0}, "link_burst"),
    ],
)
def test_bad_parameters_name_their_field(kwargs: dict[str, float], name: str) -> None:
    base = {"k": 1, "capacity": 10, "target": 0.5}
    with pytest.raises(SpecError) as err:
        EvictionConfig(**{**base, **kwargs})  # type: ignore[arg-type]
    assert err.value.field == f"eviction.{name}"


def test_landing_an_unknown_eviction_is_an_error() -> None:
    with pytest.raises(KeyError):
        EvictionPlanner(EvictionConfig(k=1, capacity=10, target=0.5)).landed("nope")
