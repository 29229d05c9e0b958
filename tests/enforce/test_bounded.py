"""BoundedLearner: an answer by the deadline whatever the learner does, never on the event loop."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest

from rvguard.enforce.bounded import DEFAULT_LEARNER_TIMEOUT, BoundedLearner
from rvguard.enforce.learners import (
    AdmitAll,
    LearnerFailure,
    LearnerTimeout,
    LoadView,
    LSQLearner,
    RandomLearner,
    RejectAll,
)
from rvguard.enforce.request import Request
from rvguard.errors import SpecError
from rvguard.events import Proposal

R = Request("r", "opp", 0.0)
VIEW = LoadView(0.0, 0, 0, 4)


class _Blocks:
    """A synchronous learner that blocks until released, counting the questions it starts."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = 0

    def propose(self, request: Request, view: LoadView) -> Proposal:
        self.started += 1
        self.gate.wait(5.0)
        return Proposal()


class _Async:
    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    async def propose(self, request: Request, view: LoadView) -> object:
        await asyncio.sleep(0)
        if self.behaviour == "raise":
            raise LookupError("no model")
        if self.behaviour == "cancel":  # it awaited something a third party cancelled
            raise asyncio.CancelledError
        if self.behaviour == "garbage":
            return {"admit": True}
        if self.behaviour == "slow":
            await asyncio.sleep(3600)
        return Proposal(admit=False, priority_hint=2)


class _ReturnsCoroutine:
    def propose(self, request: Request, view: LoadView) -> object:
        return asyncio.sleep(0)


@pytest.mark.parametrize("timeout", [0, -1.0, math.inf, math.nan, "0.1"])
def test_the_deadline_is_a_positive_number_or_none(timeout: object) -> None:
    with pytest.raises(SpecError, match="learner_timeout") as err:
        BoundedLearner(AdmitAll(), timeout)  # type: ignore[arg-type]
    assert err.value.field == "learner_timeout"
    assert BoundedLearner(AdmitAll()).timeout == DEFAULT_LEARNER_TIMEOUT


def test_rvguard_learners_and_no_deadline_are_inline_others_are_not() -> None:
    import random

    own = [AdmitAll(), RejectAll(), RandomLearner(random.Random(1)), LSQLearner([(0, 0.1), (1, 0.2)], slo={})]
    assert all(BoundedLearner(learner).inline for learner in own)
    assert not BoundedLearner(_Blocks()).inline
    assert BoundedLearner(_Blocks(), None).inline
    assert not BoundedLearner(_Async("ok"), None).inline  # a coroutine is awaited, never called inline

    class Mine(AdmitAll):  # a subclass is not rvguard's own code
        pass

    assert not BoundedLearner(Mine()).inline


async def test_a_blocked_learner_overruns_and_later_questions_do_not_queue_behind_it() -> None:
    learner = _Blocks()
    bounded = BoundedLearner(learner, 0.02)
    t0 = time.monotonic()
    first = await bounded.ask(R, VIEW)
    assert isinstance(first, LearnerTimeout) and first.reason.startswith("timeout: no answer")
    later = await asyncio.gather(*(bounded.ask(R, VIEW) for _ in range(50)))
    assert time.monotonic() - t0 < 1.0
    assert all(isinstance(p, LearnerTimeout) and "still busy" in p.reason for p in later)
    assert (learner.started, bounded.timeouts) == (1, 51)  # one question ran: nothing queued
    learner.gate.set()
    await asyncio.sleep(0.05)
    assert await bounded.ask(R, VIEW) == Proposal()  # the thread is free again
    bounded.close()


async def test_the_learner_runs_off_the_event_loop() -> None:
    seen: list[bool] = []

    class Where:
        def propose(self, request: Request, view: LoadView) -> Proposal:
            seen.append(threading.current_thread() is threading.main_thread())
            return Proposal()

    bounded = BoundedLearner(Where(), 1.0)
    assert await bounded.ask(R, VIEW) == Proposal()
    assert seen == [False]
    bounded.close()


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        ("ok", Proposal(admit=False, priority_hint=2.0)),
        ("raise", "LookupError: no model"),
        ("cancel", "CancelledError"),
        ("garbage", "TypeError: propose returned dict"),
        ("slow", "timeout"),
    ],
)
async def test_a_coroutine_learner_is_bounded_and_its_own_cancellation_is_its_failure(
    behaviour: str, expected: object
) -> None:
    bounded = BoundedLearner(_Async(behaviour), 0.05)
    got = await bounded.ask(R, VIEW)
    if isinstance(expected, Proposal):
        assert got == expected
    else:
        assert isinstance(got, LearnerFailure) and got.reason.startswith(str(expected))
        assert isinstance(got, LearnerTimeout) == (behaviour == "slow")


async def test_a_coroutine_where_a_plain_answer_is_due_is_closed_and_refused() -> None:
    bounded = BoundedLearner(_ReturnsCoroutine(), 1.0)
    got = await bounded.ask(R, VIEW)
    assert isinstance(got, LearnerFailure) and "coroutine" in got.reason
    bounded.close()


@pytest.mark.parametrize("learner", [_Blocks(), _Async("slow")])
async def test_cancelling_the_asker_propagates(learner: object) -> None:
    bounded = BoundedLearner(learner, None)  # type: ignore[arg-type]
    bounded.inline = False  # ask through the thread even without a deadline
    task = asyncio.create_task(bounded.ask(R, VIEW))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    if isinstance(learner, _Blocks):
        learner.gate.set()
    bounded.close()
