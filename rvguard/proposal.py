"""`Proposal`: what an untrusted learner proposes for a request (DESIGN §2), carried by `Arrive`,
and the proposals that stand in for a learner that failed (`LearnerFailure`, `LearnerTimeout`).

Their own module, never compiled (issue 16): they subclass `Proposal`, as tests' raising
proposals do, and an interpreted class cannot subclass a native compiled one. `rvguard.events`
re-exports `Proposal`, `rvguard.enforce.learners` the failures.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LearnerFailure", "LearnerTimeout", "Proposal"]


@dataclass(frozen=True, slots=True)
class Proposal:
    """What an untrusted learner proposes for a request: it is only a proposal.

    Frozen at run time (unlike the event records): the learner that built it is untrusted.
    """

    admit: bool = True
    objective: str | None = None
    priority_hint: float | None = None


@dataclass(frozen=True, slots=True)
class LearnerFailure(Proposal):
    """The proposal that stands in for a learner that raised or returned garbage.

    It rejects the surplus and gives no hint (the floor never depends on the
    learner); ``reason`` is ``"<ExceptionType>: <message>"``, which the core
    writes on the arrive event (``learner_error``); a learner reject says
    ``learner-error: <ExceptionType>`` (the type only: a bounded reason).
    """

    admit: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LearnerTimeout(LearnerFailure):
    """The proposal that stands in for a learner that did not answer within its deadline.

    The core rejects the surplus with reason ``learner-timeout`` (the Guard's
    ``learner_timeout``; the floor never waits for a learner).
    """
