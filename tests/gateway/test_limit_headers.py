"""The rate-limit headers and the credits-used gauge read the decision core's own ledger (issue 24).

One count of the floor credit admitted per tenant and window: the core's (`DecisionCore.floor_used`),
which admission itself reads. The expected figures are written out from the contract (B, the
weights), not read from the code under test.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from rvguard.clock import ManualClock
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.events import Admit, Arrive, Basis, Proposal
from rvguard.gateway.answers import Answers
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.prometheus import MetricsSink

from ._support import auth, contract, gateway, settings

_TENANTS = {
    "assured": {"floor": 4, "deadline": 1.5, "tier": 0},
    "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
}
_TOKENS = {
    "assured": {"floor": 30, "deadline": 1.5, "tier": 0},
    "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
}


def _remaining(answers: Answers, unit: str = "requests") -> str:
    return answers.limit_headers("assured")[f"x-ratelimit-remaining-{unit}"]


def test_headers_say_b_minus_the_floor_admissions_of_this_window_and_start_again_at_its_edge() -> None:
    c = contract(tenants=_TENANTS)  # B = 4 a 1 s window, count credits
    core, clock = DecisionCore(c), ManualClock(0.0)
    answers = Answers(c, clock, core)
    assert _remaining(answers) == "4"
    for i in range(3):
        clock.set(0.1 * (i + 1))
        core.arrive(Request(f"a{i}", "assured", t=clock.now()), Proposal(), clock.now())
    assert core.floor_used("assured", clock.now()) == 3
    assert _remaining(answers) == "1"
    assert answers.limit_headers("opportunistic") == {}  # no floor: no headers
    clock.set(1.0)  # window 1 opens: nothing spent in it yet
    assert _remaining(answers) == "4"
    core.arrive(Request("b", "assured", t=1.0), Proposal(), 1.0)
    assert _remaining(answers) == "3"


def test_token_credits_count_the_weights_the_core_admitted() -> None:
    c = contract(credit="tokens", window=60.0, tenants=_TOKENS)  # w = prompt + capped output tokens
    core, clock = DecisionCore(c), ManualClock(0.0)
    answers = Answers(c, clock, core)
    core.arrive(Request("a", "assured", t=0.0, prompt_tokens=6, max_tokens=4), Proposal(), 0.0)
    core.arrive(Request("b", "assured", t=0.0, prompt_tokens=6, max_tokens=4), Proposal(), 0.0)
    assert _remaining(answers, "tokens") == "10"  # 30 − 2 · (6 + 4)
    clock.set(60.0)
    assert _remaining(answers, "tokens") == "30"


def test_a_restarted_guard_tells_the_floor_its_previous_run_already_spent() -> None:
    """The metrics sink never saw a previous run's admissions; the core counts them (`resume`)."""
    c = contract(tenants=_TENANTS)
    core, clock = DecisionCore(c), ManualClock(0.5)
    core.resume(0.5, [("assured", 0.1, None, None, True), ("assured", 0.2, None, None, True)])
    assert _remaining(Answers(c, clock, core)) == "2"


def test_the_credits_used_gauge_reads_the_same_ledger_at_scrape_time() -> None:
    c = contract(tenants=_TENANTS)
    core, clock = DecisionCore(c), ManualClock(0.0)
    reg = CollectorRegistry()
    sink = MetricsSink(c, reg)
    sink.watch_ledger(core, clock)
    core.arrive(Request("a", "assured", t=0.0), Proposal(), 0.0)
    sink(Arrive(0.0, "x", "assured"))  # the sink's own events move no credit count
    sink(Admit(0.0, "x", Basis.FLOOR))
    assert reg.get_sample_value("rvguard_floor_credits_used", {"tenant": "assured"}) == 1
    clock.set(1.5)  # a new window, with no event since: the gauge is not stale
    assert reg.get_sample_value("rvguard_floor_credits_used", {"tenant": "assured"}) == 0


async def test_the_gateway_headers_follow_the_core_whatever_the_metrics_sink_counts(tmp_path: Path) -> None:
    """Before: the headers read the Prometheus sink's count, so a sink that counted one admission the
    core never made told the client one credit less than the core would grant."""
    c = contract(window=1000.0, tenants=_TENANTS)  # every request in window 0
    body = {"prompt": "x", "max_tokens": 1}
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, None)) as (gw, url),
        httpx.AsyncClient() as client,
    ):
        first = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        gw.metrics(Arrive(gw.clock.now(), "phantom", "assured"))  # a sink that counts differently
        gw.metrics(Admit(gw.clock.now(), "phantom", Basis.FLOOR))
        second = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        metrics = (await client.get(url + "/metrics")).text
        used = gw.guard.core.floor_used("assured", gw.clock.now())
    assert [r.status_code for r in (first, second)] == [200, 200]
    assert first.headers["x-ratelimit-remaining-requests"] == "3"
    assert second.headers["x-ratelimit-remaining-requests"] == "2" and used == 2
    assert 'rvguard_floor_credits_used{tenant="assured"} 2.0' in metrics


async def test_the_gateway_headers_count_token_credits_from_the_core(tmp_path: Path) -> None:
    c = contract(credit="tokens", window=1000.0, tenants=_TOKENS)
    body = {"prompt": "a b c d e f", "max_tokens": 4}  # 6 prompt tokens (the fake's words) + 4
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, None)) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        post = client.post
        rs = [await post(url + "/v1/completions", json=body, headers=auth("sk-assured")) for _ in range(2)]
    assert [r.headers["x-ratelimit-remaining-tokens"] for r in rs] == ["20", "10"]
