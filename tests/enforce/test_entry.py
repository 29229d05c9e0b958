"""The Guard's two ways in (`rvguard.enforce.entry`): a library caller's request is bound, stamped
and capped once (the binder and the facts read once, a copy made only where it differs); a
`BoundRequest` is taken as it is (no binder, no facts, no copy)."""

from __future__ import annotations

from typing import Any

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.entry import BoundRequest
from rvguard.enforce.guard import Guard
from rvguard.enforce.identity import Binding, Identity, IdentityBinder
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, TraceOrderError
from rvguard.events import Arrive, Event
from rvguard.facts import FactsCache, RequestFacts

from ._harness import make_contract


class Spy:
    def __init__(self) -> None:
        self.binds = 0
        self.facts = 0
        self.rebuilt = 0
        self.decided: list[Request] = []


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    s = Spy()
    bind, facts, rebound, arrive = (
        IdentityBinder.bind,
        FactsCache.__call__,
        Request.rebound,
        DecisionCore.arrive,
    )

    def spy_bind(self: IdentityBinder, identity: Identity | None) -> Binding:
        s.binds += 1
        return bind(self, identity)

    def spy_facts(self: FactsCache, *args: Any) -> RequestFacts:
        s.facts += 1
        return facts(self, *args)

    def spy_rebound(self: Request, **kw: Any) -> Request:
        s.rebuilt += 1
        return rebound(self, **kw)

    def spy_arrive(self: DecisionCore, request: Request, *args: Any) -> list[Event]:
        s.decided.append(request)
        return arrive(self, request, *args)

    monkeypatch.setattr(IdentityBinder, "bind", spy_bind)
    monkeypatch.setattr(FactsCache, "__call__", spy_facts)
    monkeypatch.setattr(Request, "rebound", spy_rebound)
    monkeypatch.setattr(DecisionCore, "arrive", spy_arrive)
    return s


async def done(request: Request) -> Response:
    return Response(text="hi", output_tokens=request.max_tokens)


@pytest.mark.pure_build  # the spies count calls a compiled module makes directly
async def test_a_library_request_is_bound_stamped_and_capped_once(spy: Spy) -> None:
    c = make_contract(output_cap=8)
    binder = IdentityBinder(c, api_keys={"k": "assured"})
    clock, trace = ManualClock(2.0), list[Event]()
    async with Guard(c, MockDispatcher(done), binder=binder, clock=clock, sinks=[trace.append]) as guard:
        out = await guard.submit(Request("a", "opp", 0.0, max_tokens=100), Identity(api_key="k"))
    assert out.status == "completed"
    assert (spy.binds, spy.facts, spy.rebuilt) == (1, 1, 1)  # the placeholder tenant, time and cap
    [request] = spy.decided
    assert (request.tenant, request.t, request.max_tokens) == ("assured", 2.0, 8)
    [arrive] = [e for e in trace if isinstance(e, Arrive)]
    assert (arrive.t, arrive.tenant, arrive.max_tokens) == (2.0, "assured", 8)


@pytest.mark.pure_build  # the spies count calls a compiled module makes directly
async def test_a_complete_library_request_is_not_copied(spy: Spy) -> None:
    c = make_contract(output_cap=8)
    clock = ManualClock(2.0)
    complete = Request("a", "assured", 2.0, max_tokens=8)
    async with Guard(c, MockDispatcher(done), clock=clock) as guard:
        assert (await guard.submit(complete)).status == "completed"
    assert (spy.binds, spy.facts, spy.rebuilt) == (0, 1, 0)
    assert spy.decided == [complete] and spy.decided[0] is complete


@pytest.mark.pure_build  # the spies count calls a compiled module makes directly
async def test_a_bound_request_is_taken_as_it_is(spy: Spy) -> None:
    c = make_contract(output_cap=8)
    clock, backend = ManualClock(2.0), MockDispatcher(done)
    facts = FactsCache(c)("assured", None, 100)
    spy.facts = 0
    async with Guard(c, backend, binder=IdentityBinder(c), clock=clock) as guard:
        bound = BoundRequest.create("a", facts, clock.now(), payload={"prompt": "x"})
        out = await guard.submit_bound(bound)
    assert out.status == "completed"
    assert (spy.binds, spy.facts, spy.rebuilt) == (0, 0, 0)
    assert spy.decided[0] is bound.request and backend.calls[0] is bound.request
    assert (bound.request.tenant, bound.request.t, bound.request.max_tokens) == ("assured", 2.0, 8)


def test_a_bound_request_must_be_the_request_of_its_facts() -> None:
    c = make_contract(output_cap=8)
    facts = FactsCache(c)("assured", None, 100)
    with pytest.raises(EnforcementError, match="not the request of its facts") as err:
        BoundRequest(Request("a", "opp", 0.0, max_tokens=8), facts)
    assert err.value.status_hint == 500
    with pytest.raises(EnforcementError, match="max_tokens 100"):
        BoundRequest(Request("a", "assured", 0.0, max_tokens=100), facts)


async def test_a_bound_request_is_stamped_on_the_guards_clock_in_the_step_it_is_submitted() -> None:
    c = make_contract(output_cap=8)
    clock = ManualClock(2.0)
    facts = FactsCache(c)("assured", None, None)
    async with Guard(c, MockDispatcher(done), clock=clock) as guard:
        with pytest.raises(EnforcementError, match="in the future") as err:
            await guard.submit_bound(BoundRequest.create("early", facts, 2.5))
        assert err.value.status_hint == 500
        assert (await guard.submit_bound(BoundRequest.create("a", facts, 2.0))).status == "completed"
        stale = BoundRequest.create("b", facts, 2.0)
        clock.advance(1.0)
        assert (await guard.submit_bound(BoundRequest.create("c", facts, 3.0))).status == "completed"
        with pytest.raises(TraceOrderError):  # made before the core's last event
            await guard.submit_bound(stale)
        assert guard.statistics().live == 0
