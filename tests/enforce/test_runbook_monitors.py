"""The guard's own output under the redline and preemption passes the runbook properties (RL, PR).

Hypothesis drives the decision core with its redline on a noisy, glitching, stale, duplicated and
jittered headroom signal, any arrivals (assured and surplus, some excess), completions and
preemptions of running surplus work; the whole trace it writes is then judged by the online
monitor with RL and PR (and WF, AF, RB): the redline's demotions cite traced, fresh samples, touch
surplus work only, and toggle within the hysteresis bound; preemption touches surplus only.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.preemption import Preemption
from rvguard.enforce.redline import HeadroomSample, redline_config
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError
from rvguard.events import Event, Proposal
from rvguard.monitors import Monitor


def _contract(dwell: int, staleness: float) -> Contract:
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "excess": "demote",
            "service": {"s_max": 0.5, "lower": 0.1},
            "tenants": {
                "assured": {"floor": 2, "deadline": 3.0},
                "opp": {"floor": 0, "deadline": 3.0, "tier": 1},
            },
            "headroom": {
                "alpha": 0.5,
                "dwell": dwell,
                "staleness": staleness,
                "resources": {
                    "kv_cache": {"h_min": 0.2, "margin": 0.1},
                    "seqs": {"h_min": 0.3, "margin": 0.05},
                },
            },
        }
    )


STEP = st.sampled_from([0.0, 0.05, 0.2, 0.5, 1.0, 3.0])
ACTION = st.one_of(
    st.tuples(st.just("arrive"), st.sampled_from(["assured", "assured", "opp", "opp", "opp"])),
    st.tuples(
        st.just("sample"),
        st.sampled_from(["kv_cache", "seqs"]),
        st.sampled_from([0.0, 0.1, 0.15, 0.25, 0.35, 0.5, 0.9]),
        st.sampled_from([0.0, 0.0, -0.2, 0.2, -5.0]),  # jitter; a large negative one is stale
    ),
    st.tuples(st.just("finish"), st.integers(0, 30)),
    st.tuples(st.just("preempt"), st.integers(0, 30)),
)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.sampled_from([0.5, 2.0, 100.0]), st.lists(st.tuples(STEP, ACTION), max_size=60))
def test_the_cores_trace_passes_rl_and_pr(
    dwell: int, staleness: float, script: list[tuple[float, tuple]]
) -> None:  # type: ignore[type-arg]
    contract = _contract(dwell, staleness)
    assert contract.headroom is not None
    core = DecisionCore(contract, redline=redline_config(contract.headroom))
    preemption = Preemption(core)
    trace: list[Event] = []
    now, n = 0.0, 0
    for step, action in script:
        now += step
        if action[0] == "arrive":
            trace += core.arrive(Request(f"r{n}", action[1], now), Proposal(), now)
            n += 1
        elif action[0] == "sample":
            _, resource, value, jitter = action
            trace += core.observe(HeadroomSample(resource, value, max(0.0, now + jitter)), now)
        elif n:
            rid = f"r{action[1] % n}"
            if core.running_basis(rid) is None:
                continue
            if action[0] == "finish":
                trace += core.finish(rid, now)
            else:
                try:
                    preemption.notice(rid, now)
                except EnforcementError:
                    continue  # protected work is refused, by construction
                trace += preemption.stop(rid, now)
    monitor = Monitor(contract, ("WF", "AF", "RB", "PR", "RL"))
    monitor.feed_all(trace)
    assert monitor.violations() == []


def test_a_demote_restore_and_preempt_run_passes() -> None:
    """A fixed run that reaches every move the property test is about (hypothesis may not, every time)."""
    contract = _contract(1, 2.0)
    assert contract.headroom is not None
    core = DecisionCore(contract, redline=redline_config(contract.headroom))
    trace = core.arrive(Request("a1", "assured", 0.0), Proposal(), 0.0)
    trace += core.arrive(Request("o1", "opp", 0.0), Proposal(), 0.0)  # runs on the second slot
    trace += core.arrive(Request("o2", "opp", 0.1), Proposal(), 0.1)
    trace += core.observe(HeadroomSample("kv_cache", 0.05, 1.0), 1.0)  # fires: o2 is held
    trace += core.finish("a1", 1.1)
    trace += core.observe(HeadroomSample("kv_cache", 0.9, 2.0), 2.0)  # clears: o2 restored, dispatched
    preemption = Preemption(core)
    preemption.notice("o1", 2.1)
    trace += preemption.stop("o1", 2.2)
    kinds = [e.kind.value for e in trace]
    assert {"sample", "demote", "restore"} <= set(kinds) and ("fail", "o1") in [
        (e.kind.value, e.rid) for e in trace
    ]
    monitor = Monitor(contract, ("WF", "AF", "RB", "PR", "RL"))
    monitor.feed_all(trace)
    assert monitor.violations() == []
