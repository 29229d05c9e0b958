"""Learners: deterministic seeds, the LSQ fit, β miscalibration and both shedding modes."""

from __future__ import annotations

import asyncio
import math
import random
from fractions import Fraction

import pytest

from rvguard.enforce.learners import (
    AdmitAll,
    LearnerFailure,
    LoadView,
    LSQLearner,
    RandomLearner,
    RejectAll,
    checked_proposal,
    consult,
    fit_least_squares,
)
from rvguard.enforce.request import Request
from rvguard.events import Proposal

from ._harness import make_contract

IDLE = LoadView(0.0, 0, 0, 4)
BUSY = LoadView(0.0, 4, 20, 4)
SAMPLES = [(n, 0.2 + 0.05 * n) for n in range(30)]


def test_trivial_learners() -> None:
    r = Request("r", "assured", 0.0)
    assert AdmitAll().propose(r, BUSY).admit
    assert not RejectAll().propose(r, IDLE).admit


def test_random_learner_is_seeded() -> None:
    r = Request("r", "opp", 0.0)
    a = [RandomLearner(random.Random(3), objectives=["assured"]).propose(r, IDLE) for _ in range(1)]
    one, two = RandomLearner(random.Random(3)), RandomLearner(random.Random(3))
    assert [one.propose(r, IDLE) for _ in range(20)] == [two.propose(r, IDLE) for _ in range(20)]
    assert a[0].objective == "assured"
    with pytest.raises(ValueError, match="p_admit"):
        RandomLearner(random.Random(), p_admit=2.0)


def test_least_squares_recovers_a_line() -> None:
    a, b, r2 = fit_least_squares(SAMPLES)
    assert a == pytest.approx(0.2)
    assert b == pytest.approx(0.05)
    assert r2 == pytest.approx(1.0)
    assert fit_least_squares([(1, 2.0), (1, 4.0)]) == (3.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="two"):
        fit_least_squares([(1, 1.0)])


def test_lsq_modes_and_beta() -> None:
    contract = make_contract(deadline=1.5)
    shed_only = LSQLearner.from_contract(contract, SAMPLES, beta=1.0)
    agnostic = LSQLearner.from_contract(contract, SAMPLES, beta=1.0, mode="class-agnostic")
    assured, opp = Request("a", "assured", 0.0), Request("o", "opp", 0.0)
    # busy: predicted 0.2 + 0.05·25 = 1.45 < 1.5 ... at load 24+1; push it over with β
    hot = LSQLearner.from_contract(contract, SAMPLES, beta=2.0)
    assert not hot.propose(opp, BUSY).admit
    assert hot.propose(assured, BUSY).admit  # sheddable-only never sheds the floored class
    assert (
        not LSQLearner.from_contract(contract, SAMPLES, beta=2.0, mode="class-agnostic")
        .propose(assured, BUSY)
        .admit
    )
    assert shed_only.propose(opp, IDLE).admit
    assert agnostic.propose(assured, IDLE).admit
    blind = LSQLearner.from_contract(contract, SAMPLES, beta=0.0)  # β = 0: predicts 0, admits all
    assert blind.propose(opp, LoadView(0.0, 1000, 1000, 4)).admit
    assert hot.propose(opp, BUSY).priority_hint == pytest.approx(2.0 * (0.2 + 0.05 * 25))
    with pytest.raises(ValueError, match="beta"):
        LSQLearner(SAMPLES, slo={}, beta=-1.0)
    with pytest.raises(ValueError, match="mode"):
        LSQLearner(SAMPLES, slo={}, mode="yolo")  # type: ignore[arg-type]


class _Stops:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def propose(self, request: Request, view: LoadView) -> Proposal:
        raise self.exc


def test_consult_turns_failures_into_rejecting_proposals_but_lets_interrupts_through() -> None:
    r = Request("r", "opp", 0.0)
    failed = consult(_Stops(ValueError("no " * 200)), r, IDLE)
    assert isinstance(failed, LearnerFailure)
    assert (failed.admit, failed.priority_hint) == (False, None)
    assert failed.reason.startswith("ValueError: no no") and len(failed.reason) == 200
    assert consult(RejectAll(), r, IDLE) == Proposal(admit=False)
    for stop in (KeyboardInterrupt(), asyncio.CancelledError(), SystemExit(1)):
        with pytest.raises(type(stop)):
            consult(_Stops(stop), r, IDLE)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Proposal(priority_hint=3), Proposal(priority_hint=3.0)),
        (Proposal(priority_hint=Fraction(1, 2)), Proposal(priority_hint=0.5)),
        (Proposal(priority_hint=10**400), Proposal(priority_hint=math.inf)),
        (Proposal(admit=False, objective="x"), Proposal(admit=False, objective="x")),
    ],
)
def test_checked_proposal_normalises_well_typed_hints(value: Proposal, expected: Proposal) -> None:
    got = checked_proposal(value)
    assert got == expected
    assert type(got.priority_hint) in (float, type(None))


class _Raising(Proposal):
    """A `Proposal` subclass whose ``admit`` raises when read."""

    def __getattribute__(self, name: str) -> object:
        if name == "admit":
            raise RuntimeError("admit exploded")
        return super().__getattribute__(name)


class _LoudError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message either")


async def _coroutine_answer() -> Proposal:  # pragma: no cover - closed, never run
    return Proposal()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (LearnerFailure(reason=None), "TypeError: LearnerFailure.reason"),  # type: ignore[arg-type]
        (LearnerFailure(reason=7), "TypeError: LearnerFailure.reason"),  # type: ignore[arg-type]
        (LearnerFailure(admit=True, reason="ok"), "ok"),  # a failure never admits
        (LearnerFailure(priority_hint="x", reason="ok"), "ok"),  # type: ignore[arg-type]
        (LearnerFailure(objective=3, reason="ok"), "ok"),  # type: ignore[arg-type]
        (_Raising(), "RuntimeError: admit exploded"),
        (object.__new__(Proposal), "AttributeError"),  # slots never set
    ],
)
def test_issue_10_2_any_answer_is_checked_inside_the_protected_region(value: object, why: str) -> None:
    """Bad `LearnerFailure` fields and raising attributes become a well-formed failure (failed before)."""
    got = checked_proposal(value)
    assert type(got) is LearnerFailure
    assert (got.admit, got.objective, got.priority_hint) == (False, None, None)
    assert type(got.reason) is str and got.reason.startswith(why)


def test_issue_10_2_an_exception_that_cannot_print_and_a_coroutine_are_failures() -> None:
    r = Request("r", "opp", 0.0)
    loud = consult(_Stops(_LoudError()), r, IDLE)
    assert isinstance(loud, LearnerFailure) and loud.reason.startswith("_LoudError")
    coro = _coroutine_answer()
    got = checked_proposal(coro)  # closed, so no "never awaited" warning (an error under pytest)
    assert isinstance(got, LearnerFailure) and "coroutine" in got.reason
    assert coro.cr_frame is None


def test_checked_proposal_makes_a_str_subclass_objective_a_plain_str() -> None:
    class Sly(str):
        def __str__(self) -> str:
            raise RuntimeError("sly")

    got = checked_proposal(Proposal(objective=Sly("gold")))
    assert got == Proposal(objective="gold") and type(got.objective) is str
