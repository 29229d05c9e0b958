"""The gateway's half of an arrival (`rvguard.gateway.arrival`): the prompt counted only where it
is spent, the facts read once and the edge's checks read from them, the request created complete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from rvguard.clock import ManualClock
from rvguard.facts import FactsCache
from rvguard.gateway.arrival import Arrival, deadline_of, facts_of
from rvguard.gateway.edge import BadRequest, Endpoint
from rvguard.gateway.wire import ForwardedContext

from ._support import contract

CTX = ForwardedContext("req-1", "00-" + "1" * 32 + "-" + "2" * 16 + "-01", None)
TOKENS = {
    "credit": "tokens",
    "tenants": {
        "assured": {"floor": 500, "deadline": 1.5, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    },
}


class Counter:
    def __init__(self, tokens: int) -> None:
        self.tokens, self.calls = tokens, 0

    async def count_prompt_tokens(
        self, endpoint: Endpoint, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> int:
        self.calls += 1
        return self.tokens


@pytest.mark.parametrize(
    ("over", "tenant", "counted"),
    [({}, "assured", None), (TOKENS, "opportunistic", None), (TOKENS, "assured", 5)],
)
async def test_the_prompt_is_counted_only_where_it_is_spent(
    over: dict[str, Any], tenant: str, counted: int | None
) -> None:
    facts, counter = FactsCache(contract(**over)), Counter(5)
    body = {"prompt": "a b c d e", "max_completion_tokens": 500}
    known, prompt = await facts_of(facts, counter, "chat", body, tenant, CTX)
    assert (prompt, counter.calls) == (counted, int(counted is not None))
    assert known == facts(tenant, counted, 500) and known.capped_tokens == 96


async def test_min_tokens_is_checked_against_the_facts_cap() -> None:
    facts = FactsCache(contract())
    known, _ = await facts_of(
        facts, Counter(1), "completions", {"prompt": "x", "min_tokens": 96}, "assured", CTX
    )
    assert known.capped_tokens == 96  # no max_tokens: the contract's cap
    with pytest.raises(BadRequest, match=r"\(96 tokens\)") as err:
        await facts_of(facts, Counter(1), "completions", {"prompt": "x", "min_tokens": 97}, "assured", CTX)
    assert (err.value.status, err.value.param) == (400, "min_tokens")


async def test_a_floored_request_of_zero_credits_is_refused() -> None:
    c = contract(**TOKENS, token_weights={"prompt": 0.0, "output": 1.0})
    facts, counter = FactsCache(c), Counter(3)
    known, prompt = await facts_of(facts, counter, "completions", {"prompt": "x"}, "assured", CTX)
    assert (prompt, counter.calls, known.weight) == (None, 0, 96.0)  # a prompt weighing 0 is not counted
    free = FactsCache(contract(**TOKENS, token_weights={"prompt": 0.0, "output": 0.0}))
    with pytest.raises(BadRequest, match="0 credits") as err:
        await facts_of(free, counter, "completions", {"prompt": "x"}, "assured", CTX)
    assert err.value.code == "zero_weight"
    opp, _ = await facts_of(free, counter, "completions", {"prompt": "x"}, "opportunistic", CTX)
    assert opp.weight == 0  # an unfloored tenant spends no floor: not refused


def test_the_deadline_runs_from_the_first_byte_unless_it_is_nearly_due() -> None:
    c, clock = contract(), ManualClock(10.0)
    assert deadline_of(c, clock, "assured", None) is None
    assert deadline_of(c, clock, "assured", 0.5) == pytest.approx(10.0 - 0.5 + 1.5)
    assert deadline_of(c, clock, "assured", 0.8) is None  # more than D/2 late: from its arrival


def test_an_arrival_is_stamped_into_a_complete_request() -> None:
    facts = FactsCache(contract())("opportunistic", None, 500)
    payload = {"body": {"prompt": "x"}}
    bound = Arrival("g0", facts, 70.0, None, payload).stamped(12.5)
    r = bound.request
    assert (r.rid, r.tenant, r.t, r.deadline, r.max_tokens) == ("g0", "opportunistic", 12.5, 70.0, 96)
    assert r.payload is payload and bound.facts is facts
