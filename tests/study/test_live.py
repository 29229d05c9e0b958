"""The live runner: an experiment's arms through the real gateway, against a fake OpenAI-compatible engine."""

from __future__ import annotations

import pytest

from rvguard.enforce.request import Request
from rvguard.errors import SpecError
from rvguard.gateway.fake import FakeUpstream
from rvguard.sim.runner import Arm
from rvguard.study.live import LiveRunner, _gateway_contract, path_capacity

from ..sim._common import MARQUEE


def _burst(arm: Arm, seed: int, rep: int) -> list[Request]:
    """12 assured at once (B = 6 entitled) and 6 opportunistic: more than the floor, more than C."""
    return [
        Request(f"r{i}", "assured" if i < 12 else "opportunistic", 0.01 * i, max_tokens=2) for i in range(18)
    ]


async def test_guarded_and_unguarded_arms_run_through_the_gateway_and_are_judged() -> None:
    async with FakeUpstream(slots=4, token_delay=0.002) as up:
        runner = LiveRunner(up.url, model=up.model, scale=1.0, tokens=16)
        arms = [
            Arm({"arm": "guard"}, MARQUEE, {"mode": "guarded", "learner": "admit-all"}),
            Arm({"arm": "unguarded"}, MARQUEE, {"mode": "unguarded", "learner": "reject-all"}),
            Arm({"arm": "fifo"}, MARQUEE, {"mode": "gated-fifo", "learner": "admit-all"}),
        ]
        guard, unguarded, fifo = await runner.arun(arms, reps=1, seed=0, arrivals=_burst)
        assert up.served > 0 and up.max_active <= 4
    # the gateway's windows start at its own clock's origin: the 0.12 s burst may straddle one edge
    g = guard.to_dict()
    assert 6 <= g["entitled"] <= 12
    assert g["admitted"] == g["entitled"] and g["rejected"] == 12 - g["entitled"]  # the floor, then excess
    assert g["af_violations"] == 0 and g["dr_wf_violations"] == 0
    assert g["floor_attainment"] == 1.0  # 2-token requests: every entitled one on time
    assert g["time_scale"] == 1.0 and g["backend"] == up.url
    u = unguarded.to_dict()
    assert u["admitted"] == 0 and u["af_violations"] == u["entitled"] > 0  # the learner alone rejects them
    f = fifo.to_dict()
    assert f["af_violations"] == 0 and f["admitted"] == g["admitted"]  # the guard's admission, FIFO order


def test_gateway_contract_per_mode() -> None:
    assert _gateway_contract("guarded", MARQUEE) is MARQUEE
    assert _gateway_contract("gated-fifo", MARQUEE) is MARQUEE  # the order is the core's dispatch policy
    for mode in ("unguarded", "server-priority"):
        c = _gateway_contract(mode, MARQUEE)
        assert all(t.floor == 0 for t in c.tenants.values()) and c.slots > 1000
    assert _gateway_contract("server-priority", MARQUEE).tenants["opportunistic"].tier == 1


async def test_modes_without_a_gateway_form_are_refused() -> None:
    runner = LiveRunner("http://127.0.0.1:9", model="m", scale=1.0)
    with pytest.raises(SpecError, match="no gateway form"):
        await runner.arun([Arm({}, MARQUEE, {"mode": "gaie"})], reps=1, seed=0)
    with pytest.raises(SpecError, match="time scale"):
        LiveRunner("http://127.0.0.1:9", model="m", scale=0.0)


async def test_path_capacity_counts_sustained_completions() -> None:
    async with FakeUpstream(slots=4, token_delay=0.005) as up:
        mu = await path_capacity(up.url, up.model, slots=4, tokens=4, seconds=1.0)
    # 4 slots × 4 tokens × 5 ms ≈ 200 requests/s at most; the gateway's own cost lowers it
    assert 10 < mu < 220


def test_gated_fifo_is_the_core_dispatching_in_arrival_order() -> None:
    from rvguard.gateway.app import Gateway, GatewaySettings

    gw = Gateway(MARQUEE, GatewaySettings(upstream="http://127.0.0.1:9", dispatch_policy="fifo"))
    assert gw.guard.core.dispatch_policy == "fifo"
    assert (
        Gateway(MARQUEE, GatewaySettings(upstream="http://127.0.0.1:9")).guard.core.dispatch_policy
        == "priority"
    )
