"""A user's own property enforced live in the Guard (`rvguard.enforce.gate`): for each of the three
example tables, a run that breaks it without the gate and does not with it (the admission is
refused, reason ``property: NAME``); a floor admission the table would refuse goes out with a
``shield`` alert record (the built-in guarantee first); a dispatch a table delays waits its turn."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rvguard.clock import ManualClock
from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.gate import Gate
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.learners import LoadView
from rvguard.enforce.outcome import Outcome
from rvguard.enforce.request import Request
from rvguard.events import Event, Proposal
from rvguard.properties import PropertyTable, TableMonitor
from rvguard.properties.load import load_properties

EX = Path(__file__).resolve().parents[2] / "examples" / "properties"
(CONCURRENCY,) = load_properties(EX / "tenant_concurrency.yaml")
(TOKENS,) = load_properties(EX / "tenant_tokens.yaml")
(COOLDOWN,) = load_properties(EX / "cooldown.yaml")


def _contract() -> Contract:
    return contract_from_mapping(
        {
            "epoch": 0.0,
            "window": 1.0,
            "slots": 8,
            "output_cap": 1024,
            "service": {"s_max": 5.0, "lower": 0.0},
            "tenants": {
                "acme": {"floor": 0, "deadline": 10.0, "tier": 1},
                "assured": {"floor": 1, "deadline": 10.0, "tier": 0},
            },
        }
    )


class RejectFirst:
    """A learner that rejects the rids it is given and admits every other request."""

    def __init__(self, rids: Sequence[str]) -> None:
        self.rids = set(rids)

    def propose(self, request: Request, view: LoadView) -> Proposal:
        return Proposal(admit=request.rid not in self.rids)


async def _run(
    tables: Sequence[PropertyTable], plan: Sequence[tuple[float, Request]], **kw: Any
) -> tuple[Guard, list[Outcome], list[Event]]:
    """Submit each request at its time (a manual clock); the backend answers once all are in."""
    clock, release, trace = ManualClock(), asyncio.Event(), []

    async def handler(request: Request) -> Response:
        await release.wait()
        return Response()

    kw.setdefault("learner_timeout", None)
    learner = kw.pop("learner", None)  # a collaborator; the rest is configuration
    guard = Guard(
        _contract(),
        MockDispatcher(handler),
        learner=learner,
        sinks=[trace.append],
        clock=clock,
        config=GuardConfig(properties=tables, **kw),
    )
    async with guard:
        tasks = []
        for t, request in plan:
            clock.set(t)
            tasks.append(asyncio.create_task(guard.submit(dataclasses.replace(request, t=t))))
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        release.set()
        outcomes = list(await asyncio.gather(*tasks))
    return guard, outcomes, trace


def _req(rid: str, tenant: str = "acme", prompt: int = 100, max_tokens: int = 1024) -> Request:
    return Request(rid, tenant, 0.0, prompt_tokens=prompt, max_tokens=max_tokens)


CASES = {
    "TENANT_CONCURRENCY": (CONCURRENCY, [(i / 10, _req(f"r{i}")) for i in range(3)], {}),
    "TENANT_TOKENS": (TOKENS, [(i / 10, _req(f"r{i}", prompt=3000)) for i in range(2)], {}),
    "COOLDOWN": (COOLDOWN, [(0.0, _req("r0")), (0.5, _req("r1"))], {"learner": RejectFirst(["r0"])}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_property_breaks_without_the_gate_and_holds_with_it(name: str) -> None:
    table, plan, kw = CASES[name]
    _, bare, trace = asyncio.run(_run([], plan, **kw))
    (broken,) = TableMonitor(_contract(), [table]).feed_all(trace)
    last = plan[-1][1].rid
    assert broken.rid == last and bare[-1].status == "completed"

    guard, outcomes, trace = asyncio.run(_run([table], plan, **kw))
    assert TableMonitor(_contract(), [table]).feed_all(trace) == []
    assert (outcomes[-1].status, outcomes[-1].reason) == ("rejected", f"property: {name}")
    assert [o.status for o in outcomes[:-1]] == [o.status for o in bare[:-1]]  # the others untouched
    assert isinstance(guard.shield, Gate) and guard.shield.refused == 1 and guard.shield.alerts == []
    (reject,) = [ev for ev in trace if ev.rid == last and ev.kind.value == "reject"]
    assert "--admit [" in reject.extra["shield"]  # type: ignore[attr-defined]  # the edge it would have taken


def test_shadow_lets_the_event_out_and_alerts() -> None:
    table, plan, kw = CASES["TENANT_CONCURRENCY"]
    guard, outcomes, trace = asyncio.run(_run([table], plan, shadow=True, **kw))
    assert [o.status for o in outcomes] == ["completed"] * 3
    assert not isinstance(guard.shield, Gate) and guard.shield is not None
    (alert,) = guard.shield.alerts
    assert "would replace admit of r2" in alert.detail
    assert [ev.condition for ev in trace if ev.kind.value == "alert"] == ["shield"]  # type: ignore[attr-defined]


def test_a_floor_admission_comes_first_and_the_conflict_is_traced() -> None:
    """``assured`` holds a floor of 1 per window: r0 is admitted on it, r1 (excess) rejected at
    0.5; r2 in the next window is entitled, 0.6 s after that reject. COOLDOWN would refuse it; AF
    requires it (Z3 reports the pair as a conflict): it is admitted, and an alert record says so."""
    plan = [(0.0, _req("r0", "assured")), (0.5, _req("r1", "assured")), (1.1, _req("r2", "assured"))]
    guard, outcomes, trace = asyncio.run(_run([COOLDOWN], plan))
    assert [o.status for o in outcomes] == ["completed", "rejected", "completed"]
    admit = next(ev for ev in trace if ev.rid == "r2" and ev.kind.value == "admit")
    assert admit.basis.value == "floor"  # type: ignore[attr-defined]
    (record,) = [ev for ev in trace if ev.kind.value == "alert" and ev.condition == "shield"]  # type: ignore[attr-defined]
    assert "admit of r2" in record.extra["detail"]  # type: ignore[attr-defined]
    assert "AF" in record.extra["detail"] and "COOLDOWN" in record.extra["detail"]  # type: ignore[attr-defined]
    assert isinstance(guard.shield, Gate) and guard.shield.refused == 0


(DISPATCH_LIMIT,) = load_properties(Path(__file__).with_name("running_limit.yaml"))


def test_a_dispatch_the_table_delays_waits_for_a_slot_of_its_tenant() -> None:
    """A table on dispatch (remedy delay): the third request stays queued until one of the first two
    ends, then runs; nothing is refused and no instant has three running."""
    plan = [(i / 10, _req(f"r{i}")) for i in range(3)]
    guard, outcomes, trace = asyncio.run(_run([DISPATCH_LIMIT], plan))
    assert [o.status for o in outcomes] == ["completed"] * 3
    assert TableMonitor(_contract(), [DISPATCH_LIMIT]).feed_all(trace) == []
    order = [(ev.kind.value, ev.rid) for ev in trace if ev.kind.value in ("dispatch", "complete")]
    assert order.index(("dispatch", "r2")) > min(
        order.index(("complete", "r0")), order.index(("complete", "r1"))
    )
    assert isinstance(guard.shield, Gate) and guard.shield.delayed >= 1 and guard.shield.refused == 0
