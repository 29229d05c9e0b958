"""The decision core: edit rules, ranking, deferred drop, atomic rejection, the table."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from rvguard.enforce.core import TRANSITIONS, DecisionCore, _Entry
from rvguard.enforce.learners import LearnerFailure, LearnerTimeout
from rvguard.enforce.request import Request
from rvguard.errors import EnforcementError, TraceOrderError
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Drop,
    Event,
    EventKind,
    Evict,
    Fail,
    Proposal,
    Reject,
    Relocate,
    Restore,
    Route,
    Sample,
    Stall,
    Watch,
    event_to_dict,
)
from rvguard.lifecycle import Stage

from ._harness import Arrival, check_af, check_dr, check_wf, drive, make_contract

NO = Proposal(admit=False)
YES = Proposal()


def req(rid: str, tenant: str, t: float, **kw: object) -> Request:
    return Request(rid, tenant, t, **kw)  # type: ignore[arg-type]


def kinds(events: list[object]) -> list[str]:
    return [e.kind.value for e in events]  # type: ignore[attr-defined]


def test_entitled_admitted_whatever_the_learner_says() -> None:
    core = DecisionCore(make_contract(slots=1, floor=2))
    out = [core.arrive(req(f"a{i}", "assured", 0.1), NO, 0.1) for i in range(3)]
    assert out[0][1] == Admit(0.1, "a0", Basis.FLOOR)
    assert out[1][1] == Admit(0.1, "a1", Basis.FLOOR)
    assert out[2][1] == Reject(0.1, "a2", "excess")
    assert isinstance(out[0][0], Arrive)
    assert out[0][0].proposal == NO
    # a new window refills the credits
    assert core.arrive(req("a3", "assured", 1.0), NO, 1.0)[1] == Admit(1.0, "a3", Basis.FLOOR)


def test_demote_policy_admits_excess_at_opportunistic_rank() -> None:
    core = DecisionCore(make_contract(slots=1, floor=1, excess="demote"))
    core.arrive(req("a0", "assured", 0.0), YES, 0.0)  # takes the slot
    assert core.arrive(req("a1", "assured", 0.0), YES, 0.0)[1] == Admit(0.0, "a1", Basis.DEMOTED)
    assert core.arrive(req("a2", "assured", 0.0), NO, 0.0)[1] == Reject(0.0, "a2", "learner")
    core.arrive(req("o1", "opp", 0.1), Proposal(priority_hint=-5.0), 0.1)
    # the opportunistic request with the better hint goes before the demoted one
    assert kinds(core.finish("a0", 0.2)) == ["complete", "dispatch"]
    assert core.finish("o1", 0.3)[1] == Dispatch(0.3, "a1")


def test_surplus_is_the_learners_call() -> None:
    core = DecisionCore(make_contract())
    assert core.arrive(req("o1", "opp", 0.0), YES, 0.0)[1] == Admit(0.0, "o1", Basis.SURPLUS)
    assert core.arrive(req("o2", "opp", 0.0), NO, 0.0)[1] == Reject(0.0, "o2", "learner")


def test_priority_ranks_true_tier_and_hint_only_orders_surplus() -> None:
    core = DecisionCore(make_contract(slots=1, floor=3))
    core.arrive(req("o0", "opp", 0.0), YES, 0.0)
    flood = Proposal(priority_hint=-math.inf, objective="assured")
    core.arrive(req("o1", "opp", 0.1), flood, 0.1)
    core.arrive(req("o2", "opp", 0.1), Proposal(priority_hint=float("nan")), 0.1)
    core.arrive(req("a1", "assured", 0.2), NO, 0.2)
    core.arrive(req("a2", "assured", 0.3), YES, 0.3)
    order = []
    rid = "o0"
    for i in range(4):
        evs = core.finish(rid, 1.0 + i)
        rid = next(e.rid for e in evs if isinstance(e, Dispatch))
        order.append(rid)
    assert order == ["a1", "a2", "o1", "o2"]


def test_fifo_policy_ignores_tiers() -> None:
    core = DecisionCore(make_contract(slots=1), dispatch_policy="fifo")
    core.arrive(req("o0", "opp", 0.0), YES, 0.0)
    core.arrive(req("o1", "opp", 0.1), YES, 0.1)
    core.arrive(req("a1", "assured", 0.2), YES, 0.2)
    assert core.finish("o0", 0.5)[1] == Dispatch(0.5, "o1")


def test_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="dispatch_policy"):
        DecisionCore(make_contract(), dispatch_policy="lifo")  # type: ignore[arg-type]


def test_output_cap_forced_and_deadline_explicit() -> None:
    core = DecisionCore(make_contract(output_cap=16))
    a = core.arrive(req("a", "assured", 0.5, max_tokens=1000), YES, 0.5)[0]
    assert isinstance(a, Arrive)
    assert a.max_tokens == 16
    assert a.deadline == 2.0
    b = core.arrive(req("b", "assured", 0.5, deadline=0.9), YES, 0.5)[0]
    assert isinstance(b, Arrive)
    assert b.max_tokens == 16
    assert b.deadline == 0.9


def test_at_most_c_in_flight_and_slot_handoff() -> None:
    core = DecisionCore(make_contract(slots=2, floor=10))
    for i in range(5):
        core.arrive(req(f"a{i}", "assured", 0.0), YES, 0.0)
        core._check()
    assert core.in_flight == 2
    assert core.queue_depth == 3
    assert core.finish("a0", 0.1) == [Complete(0.1, "a0"), Dispatch(0.1, "a2")]
    assert core.finish("a1", 0.1, failed=True, reason="500") == [Fail(0.1, "a1", "500"), Dispatch(0.1, "a3")]
    assert core.in_flight == 2
    assert core.queue_depth == 1


def test_deferred_drop_only_when_doomed() -> None:
    core = DecisionCore(make_contract(slots=1, floor=10, lower=0.3), deferred_drop=True)
    core.arrive(req("a0", "assured", 0.0), YES, 0.0)
    core.arrive(req("a1", "assured", 0.0, deadline=1.0), YES, 0.0)
    core.arrive(req("a2", "assured", 0.0, deadline=1.3), YES, 0.0)
    # at 1.0: a1 is doomed (1.0 + 0.3 > 1.0); a2 is not (1.0 + 0.3 <= 1.3): dispatched, not dropped
    out = core.finish("a0", 1.0)
    assert out == [Complete(1.0, "a0"), Drop(1.0, "a1", "doomed"), Dispatch(1.0, "a2")]
    assert core.statistics().dropped == 1


def test_no_deferred_drop_by_default() -> None:
    core = DecisionCore(make_contract(slots=1, floor=10, lower=0.3))
    core.arrive(req("a0", "assured", 0.0), YES, 0.0)
    core.arrive(req("a1", "assured", 0.0, deadline=0.5), YES, 0.0)
    assert core.finish("a0", 1.0)[1] == Dispatch(1.0, "a1")


def test_three_state_gate_counts_uncertain() -> None:
    core = DecisionCore(
        make_contract(slots=1, floor=10, lower=0.1, upper=0.4), deferred_drop=True, gate_upper=True
    )
    core.arrive(req("a0", "assured", 0.0), YES, 0.0)
    core.arrive(req("a1", "assured", 0.0, deadline=1.3), YES, 0.0)  # sure: 1.0 + 0.4 <= 1.3? no -> uncertain
    core.arrive(req("a2", "assured", 0.0, deadline=5.0), YES, 0.0)
    core.finish("a0", 1.0)
    core.finish("a1", 1.2)
    stats = core.statistics()
    assert (stats.uncertain, stats.dropped, stats.dispatched) == (1, 0, 3)


def test_cancel_queued_ends_with_fail_never_drop() -> None:
    core = DecisionCore(make_contract(slots=1, floor=10))
    core.arrive(req("a0", "assured", 0.0), YES, 0.0)
    core.arrive(req("a1", "assured", 0.0), YES, 0.0)
    assert core.cancel("a1", 0.1) == [Fail(0.1, "a1", "cancelled")]
    assert core.queue_depth == 0
    assert not core.is_live("a1")
    assert core.cancel("a1", 0.1) == []  # idempotent
    core._check()


def test_cancel_running_frees_the_slot() -> None:
    core = DecisionCore(make_contract(slots=1, floor=10))
    core.arrive(req("a0", "assured", 0.0), YES, 0.0)
    core.arrive(req("a1", "assured", 0.0), YES, 0.0)
    assert core.cancel("a0", 0.2, "client gone") == [Fail(0.2, "a0", "client gone"), Dispatch(0.2, "a1")]
    core._check()


def test_fail_queued_on_shutdown() -> None:
    core = DecisionCore(make_contract(slots=1, floor=10))
    for i in range(3):
        core.arrive(req(f"a{i}", "assured", 0.0), YES, 0.0)
    assert core.fail_queued(0.5) == [Fail(0.5, "a1", "shutdown"), Fail(0.5, "a2", "shutdown")]
    assert core.in_flight == 1
    assert core.queue_depth == 0
    core._check()


def test_finish_of_a_queued_request_is_rejected_atomically() -> None:
    core = DecisionCore(make_contract(slots=1, floor=10))
    core.arrive(req("a0", "assured", 0.0), YES, 0.0)
    core.arrive(req("a1", "assured", 0.0), YES, 0.0)
    before = core.statistics()
    with pytest.raises(EnforcementError, match="not in flight"):
        core.finish("a1", 0.1)
    with pytest.raises(EnforcementError, match="unknown"):
        core.finish("zz", 0.1)
    assert core.statistics() == before
    core._check()


def test_misuse_raises_before_any_change() -> None:
    core = DecisionCore(make_contract())
    core.arrive(req("a0", "assured", 1.0), YES, 1.0)
    before = core.statistics()
    with pytest.raises(TraceOrderError):
        core.arrive(req("a1", "assured", 0.5), YES, 0.5)
    with pytest.raises(EnforcementError, match="unknown tenant") as err:
        core.arrive(req("x", "mallory", 1.0), YES, 1.0)
    assert err.value.status_hint == 403
    with pytest.raises(EnforcementError, match="already live"):
        core.arrive(req("a0", "assured", 1.0), YES, 1.0)
    assert core.statistics() == before


def _ended_four_ways(core: DecisionCore) -> None:
    """Four requests, each ended with a different terminal event (reject, complete, drop, fail)."""
    core.arrive(req("rej", "opp", 0.0), NO, 0.0)
    core.arrive(req("done", "assured", 0.0), YES, 0.0)
    core.finish("done", 0.1)
    core.arrive(req("run", "assured", 0.1), YES, 0.1)  # holds the only slot
    core.arrive(req("doomed", "assured", 0.1, deadline=0.15), YES, 0.1)
    core.arrive(req("gone", "assured", 0.1), YES, 0.1)
    core.cancel("gone", 0.1)
    core.finish("run", 0.2)  # the slot frees at 0.2: 0.2 + L > 0.15, "doomed" is dropped


def test_issue_10_8_a_rid_is_used_once_even_after_its_terminal_event() -> None:
    """WF allows one arrive per rid in a whole trace: the core refused only live ones (failed before)."""
    core = DecisionCore(make_contract(slots=1, floor=10), deferred_drop=True)
    _ended_four_ways(core)
    assert {"rej", "done", "doomed", "gone"}.isdisjoint(core._live)
    before = core.statistics()
    assert (before.rejected, before.completed, before.dropped, before.failed) == (1, 2, 1, 1)
    for rid in ("rej", "done", "doomed", "gone", "run"):
        with pytest.raises(EnforcementError, match="already ended") as err:
            core.arrive(req(rid, "assured", 1.0), YES, 1.0)
        assert err.value.status_hint == 409
    assert core.statistics() == before
    core.arrive(req("fresh", "assured", 1.0), YES, 1.0)


@pytest.mark.parametrize("deadline", [0.999, -math.inf, math.nan, math.inf])
def test_issue_10_8_a_deadline_before_the_arrival_is_refused(deadline: float) -> None:
    """An absolute deadline before its own arrival (or not a number) is refused (failed before)."""
    core = DecisionCore(make_contract())
    with pytest.raises(EnforcementError, match="deadline") as err:
        core.arrive(req("a", "assured", 1.0, deadline=deadline), YES, 1.0)
    assert err.value.status_hint == 400
    assert core.statistics().arrived == 0
    assert kinds(core.arrive(req("a", "assured", 1.0, deadline=1.0), YES, 1.0))[:2] == ["arrive", "admit"]


def _any_event(kind: EventKind) -> Event:
    """An event of each kind for rid ``r`` (DESIGN §2 and §10), written out here."""
    makers: dict[str, Callable[[], Event]] = {
        "arrive": lambda: Arrive(0.0, "r", "assured"),
        "admit": lambda: Admit(0.0, "r"),
        "reject": lambda: Reject(0.0, "r"),
        "dispatch": lambda: Dispatch(0.0, "r"),
        "complete": lambda: Complete(0.0, "r"),
        "drop": lambda: Drop(0.0, "r"),
        "fail": lambda: Fail(0.0, "r"),
        "sample": lambda: Sample(0.0, "kv", 0.5, 0.0),
        "route": lambda: Route(0.0, "r", "e0", 0.0),
        "demote": lambda: Demote(0.0, "r", "kv", 0.0),
        "restore": lambda: Restore(0.0, "r", "kv", 0.0),
        "evict": lambda: Evict(0.0, "r", 5),
        "relocate": lambda: Relocate(0.0, "r", "e1"),
        "alert": lambda: Watch(0.0, "service", 2.0, 1.0, 0.0),
        "stall": lambda: Stall(0.0, 0.5, 0.0),
    }
    return makers[kind.value]()


def test_every_state_kind_pair_is_in_the_table_or_rejected() -> None:
    contract = make_contract()
    for state in Stage:
        for kind in EventKind:
            core = DecisionCore(contract)
            entry = _Entry(req("r", "assured", 0.0), core.facts("assured", None, None), 1.0)
            entry.state = state
            ev = _any_event(kind)
            if (state, kind) in TRANSITIONS:
                continue
            with pytest.raises(EnforcementError, match="illegal"):
                core._apply(entry, ev)
            assert entry.state is state
    # 8 of DESIGN §2, plus demote, restore, a held request failed, evict and an evicted request failed
    assert len(TRANSITIONS) == 13


def test_token_credits_spend_weights() -> None:
    core = DecisionCore(make_contract(floor=100, credit="tokens"))
    kw = {"prompt_tokens": 20}
    a = core.arrive(req("a", "assured", 0.0, max_tokens=30, **kw), NO, 0.0)  # w = 50
    b = core.arrive(req("b", "assured", 0.0, max_tokens=40, **kw), NO, 0.0)  # w = 60: 110 > 100
    c = core.arrive(req("c", "assured", 0.0, max_tokens=10, **kw), NO, 0.0)  # prefix rule: not entitled
    assert [a[1].kind, b[1].kind, c[1].kind] == [EventKind.ADMIT, EventKind.REJECT, EventKind.REJECT]
    core._check()


def test_driven_trace_is_well_formed_and_af_dr_clean() -> None:
    contract = make_contract(slots=2, floor=3, lower=0.2)
    arrivals = [
        Arrival(0.05 * i, "assured" if i % 3 else "opp", 0.9, NO if i % 2 else YES) for i in range(60)
    ]
    trace = drive(DecisionCore(contract, deferred_drop=True), arrivals)
    assert check_wf(trace) == []
    assert check_af(contract, trace) == []
    assert check_dr(contract, trace) == []
    assert any(isinstance(e, Drop) for e in trace)


def test_ill_typed_proposal_is_a_learner_failure_not_a_crash() -> None:
    """The core takes whatever a driver hands it: garbage rejects the surplus, never the floor."""
    core = DecisionCore(make_contract(slots=1, floor=1, excess="demote"))
    floor = core.arrive(req("a", "assured", 0.0), None, 0.0)  # type: ignore[arg-type]
    excess = core.arrive(req("b", "assured", 0.0), Proposal(priority_hint="x"), 0.0)  # type: ignore[arg-type]
    opp = core.arrive(req("o", "opp", 0.0), LearnerFailure(reason="ValueError: boom"), 0.0)
    assert floor[1] == Admit(0.0, "a", Basis.FLOOR)
    assert excess[1] == Reject(0.0, "b", "learner-error: TypeError")
    assert excess[0].extra["learner_error"] == (  # type: ignore[union-attr]
        "TypeError: Proposal.priority_hint must be a real number or None, got 'x'"
    )
    assert opp[1] == Reject(0.0, "o", "learner-error: ValueError")
    arrive = opp[0]
    assert isinstance(arrive, Arrive)
    assert (arrive.proposal, dict(arrive.extra)) == (NO, {"learner_error": "ValueError: boom"})
    assert event_to_dict(arrive)["learner_error"] == "ValueError: boom"
    core._check()


def test_two_steps_the_contract_decides_at_once_and_only_surplus_waits_for_the_learner() -> None:
    core = DecisionCore(make_contract(slots=1, floor=1, excess="demote"))
    assert kinds(core.receive(req("a", "assured", 0.0), 0.0)) == ["arrive", "admit", "dispatch"]
    for rid, tenant in (("b", "assured"), ("o", "opp"), ("p", "opp")):
        got = core.receive(req(rid, tenant, 0.0), 0.0)
        assert kinds(got) == ["arrive"] and got[0].proposal is None  # type: ignore[attr-defined]
        assert core.awaits_decision(rid)
    core._check()
    demoted = core.decide("b", Proposal(priority_hint=math.inf), 0.5)  # excess under demote: the learner's
    assert demoted == [Admit(0.5, "b", Basis.DEMOTED)]
    assert dict(demoted[0].extra) == {"proposal": {"admit": True}}  # the non-finite hint is ignored
    late = core.decide("o", LearnerTimeout(reason="timeout: no answer in 0.1 s"), 0.6)
    assert late == [Reject(0.6, "o", "learner-timeout")]
    assert dict(late[0].extra) == {
        "proposal": {"admit": False},
        "learner_error": "timeout: no answer in 0.1 s",
    }
    assert event_to_dict(late[0])["learner_error"].startswith("timeout")
    assert core.cancel("p", 0.7) == [Reject(0.7, "p", "cancelled")]  # never admitted: a reject
    with pytest.raises(EnforcementError, match="not waiting"):
        core.decide("a", YES, 0.7)
    assert not core.awaits_decision("a")
    core._check()


@pytest.mark.parametrize(
    ("pool", "why"), [("pool-exhausted", "pool-exhausted"), ("floor-lowered", "pool-lowered")]
)
def test_issue_25_a_cancel_while_waiting_says_why_the_floor_was_refused(pool: str, why: str) -> None:
    """Under ``excess: demote`` an entitled request the pool refused waits for the learner; cancelled
    there (client gone, shutdown), its reject records the refusal as the decision would have
    (``floor_refused``: AF's declared exception), not an undeclared reject of an entitled request."""
    from rvguard.watch_events import FLOOR_REFUSED

    core = DecisionCore(make_contract(slots=1, floor=2, excess="demote"))
    assert len(core.receive(Request("a0", "assured", 0.0, pool=pool), 0.0)) == 1  # the arrival alone
    assert core.awaits_decision("a0")
    (reject,) = core.cancel("a0", 0.5, "shutdown")
    assert isinstance(reject, Reject) and reject.extra[FLOOR_REFUSED] == why
    core.receive(Request("o0", "opp", 0.6), 0.6)  # not entitled: its cancel records no refusal
    (plain,) = core.cancel("o0", 0.7)
    assert FLOOR_REFUSED not in plain.extra
