"""One request, one pass through the gateway (issue 24, item 4): the identity is bound once, the
request's facts (the output cap among them) are computed once, and the `Request` the core decides
on is the one the gateway created, complete: never rebuilt on the way."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.identity import Binding, Identity, IdentityBinder
from rvguard.enforce.request import Request
from rvguard.facts import FactsCache, RequestFacts
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, read_trace, settings

TOKENS = {
    "credit": "tokens",
    "tenants": {
        "assured": {"floor": 500, "deadline": 1.5, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    },
}


@dataclass
class Spies:
    """What one request did: binder calls, facts calls, Requests made, rebuilt and decided on."""

    binds: list[Identity | None] = field(default_factory=list)
    facts: list[tuple[str, int | None, int | None]] = field(default_factory=list)
    made: list[Request] = field(default_factory=list)
    rebuilt: list[Request] = field(default_factory=list)
    decided: list[Request] = field(default_factory=list)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> Spies:
    s = Spies()
    bind, facts, init = IdentityBinder.bind, FactsCache.__call__, Request.__init__
    rebound, arrive, receive = Request.rebound, DecisionCore.arrive, DecisionCore.receive

    def spy_bind(self: IdentityBinder, identity: Identity | None) -> Binding:
        s.binds.append(identity)
        return bind(self, identity)

    def spy_facts(self: FactsCache, tenant: str, prompt: int | None, out: int | None) -> RequestFacts:
        s.facts.append((tenant, prompt, out))
        return facts(self, tenant, prompt, out)

    def spy_init(self: Request, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        s.made.append(self)

    def spy_rebound(self: Request, **kw: Any) -> Request:
        s.rebuilt.append(self)
        return rebound(self, **kw)

    def spy_arrive(self: DecisionCore, request: Request, *args: Any, **kw: Any) -> Any:
        s.decided.append(request)
        return arrive(self, request, *args, **kw)

    def spy_receive(self: DecisionCore, request: Request, *args: Any, **kw: Any) -> Any:
        s.decided.append(request)
        return receive(self, request, *args, **kw)

    monkeypatch.setattr(IdentityBinder, "bind", spy_bind)
    monkeypatch.setattr(FactsCache, "__call__", spy_facts)
    monkeypatch.setattr(Request, "__init__", spy_init)
    monkeypatch.setattr(Request, "rebound", spy_rebound)
    monkeypatch.setattr(DecisionCore, "arrive", spy_arrive)
    monkeypatch.setattr(DecisionCore, "receive", spy_receive)
    return s


@pytest.mark.parametrize(
    ("credit", "key", "body"),
    [
        ("count", "sk-assured", {"prompt": "a b c", "max_tokens": 500}),
        ("count", "sk-opp", {"prompt": "a b c", "stream": True}),
        ("tokens", "sk-assured", {"prompt": "a b c", "max_tokens": 7, "stream": True}),
        ("tokens", "sk-opp", {"prompt": "a b c", "max_tokens": 7}),
    ],
)
@pytest.mark.pure_build  # the spies count calls a compiled module makes directly
async def test_one_request_is_bound_once_its_facts_computed_once_and_it_is_never_rebuilt(
    tmp_path: Path, spies: Spies, credit: str, key: str, body: dict[str, Any]
) -> None:
    c = contract(**TOKENS) if credit == "tokens" else contract()
    trace = tmp_path / "t.jsonl"
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, trace)) as (_gw, url),
        httpx.AsyncClient(timeout=10) as client,
    ):
        r = await client.post(url + "/v1/completions", json=body, headers=auth(key))
    assert r.status_code == 200, r.text
    tenant = "assured" if key == "sk-assured" else "opportunistic"
    prompt = 3 if credit == "tokens" and tenant == "assured" else None  # counted only where it is spent
    assert spies.binds == [Identity(api_key=key)]  # the gateway's binding, on the headers; none after
    assert spies.facts == [(tenant, prompt, body.get("max_tokens"))]  # once, the cap among them
    assert spies.rebuilt == []
    [request] = spies.decided
    assert request is spies.made[0]  # the core decides on the Request the gateway created
    capped = min(body.get("max_tokens", 96), 96)
    assert (request.tenant, request.max_tokens, request.prompt_tokens) == (tenant, capped, prompt)
    [arrive] = [e for e in read_trace(trace) if e["kind"] == "arrive"]
    assert (arrive["t"], arrive["max_tokens"], arrive["tenant"]) == (request.t, capped, tenant)
    assert up.bodies[0]["max_tokens"] == capped  # the engine gets the same cap


@pytest.mark.parametrize("credit", ["count", "tokens"])
@pytest.mark.pure_build  # the spies count calls a compiled module makes directly
async def test_the_edge_refuses_min_tokens_above_the_cap_from_the_same_facts(
    tmp_path: Path, spies: Spies, credit: str
) -> None:
    c = contract(**TOKENS) if credit == "tokens" else contract()
    trace = tmp_path / "t.jsonl"
    body = {"prompt": "a b", "max_tokens": 4, "min_tokens": 5}
    async with (
        FakeUpstream() as up,
        gateway(c, settings(up.url, trace)) as (_gw, url),
        httpx.AsyncClient(timeout=10) as client,
    ):
        r = await client.post(url + "/v1/completions", json=body, headers=auth("sk-assured"))
        refused = list(spies.facts)
        ok = await client.post(
            url + "/v1/completions", json={**body, "min_tokens": 4}, headers=auth("sk-assured")
        )
    assert r.status_code == 400 and r.json()["error"]["param"] == "min_tokens", r.text
    assert "(4 tokens)" in r.json()["error"]["message"]
    assert ok.status_code == 200, ok.text
    prompt = 2 if credit == "tokens" else None
    assert refused == [("assured", prompt, 4)]  # the edge read the cap from the request's facts
    assert spies.facts == [("assured", prompt, 4)] * 2  # and the admitted one read them once
    assert [e["kind"] for e in read_trace(trace) if e["kind"] == "arrive"] == ["arrive"]  # the refused: none
    assert len(up.bodies) == 1 and spies.binds == [Identity(api_key="sk-assured")] * 2
