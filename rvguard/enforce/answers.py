"""A learner's answer, checked, and what it is shown (`LoadView`): the per-arrival half of `learners`.

Whatever a learner returns goes through `checked_proposal` before the core acts
on it (module doc of `rvguard.enforce.learners`): a well-typed `Proposal` made
plain, else a `LearnerFailure` naming what was wrong. These run on every
arrival, so they have their own module, which the compiled build (issue 16)
compiles; `rvguard.enforce.learners` re-exports them beside the learners.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..proposal import LearnerFailure, LearnerTimeout, Proposal

__all__ = [
    "LoadView",
    "checked_proposal",
    "failure_from",
    "reject_reason",
    "traced_proposal",
    "usable_proposal",
]


@dataclass(frozen=True, slots=True)
class LoadView:
    """What a learner may look at: the load now (read-only; the core owns the state)."""

    now: float
    in_flight: int
    queue_depth: int
    slots: int

    def __init__(self, now: float, in_flight: int, queue_depth: int, slots: int) -> None:
        # written out as the frozen dataclass would generate it, so that the compiled build
        # compiles it (mypyc turns each ``object.__setattr__`` into a store)
        object.__setattr__(self, "now", now)
        object.__setattr__(self, "in_flight", in_flight)
        object.__setattr__(self, "queue_depth", queue_depth)
        object.__setattr__(self, "slots", slots)

    @property
    def load(self) -> int:
        """Outstanding admitted requests (running + queued)."""
        return self.in_flight + self.queue_depth


_REASON_CAP = 200  # a learner's message goes into every trace line it causes: keep it short


def _text(value: object, show: Callable[[object], str] = str) -> str:
    """``show(value)``, or a placeholder when even that raises (a learner's object may)."""
    try:
        return show(value)
    except Exception:  # noqa: BLE001 - an unprintable value is still a learner failure
        return "<unprintable>"


def _failure(kind: str, message: object) -> LearnerFailure:
    return LearnerFailure(reason=f"{kind}: {_text(message)}"[:_REASON_CAP])


_PLAIN_HINT = (float, type(None))
_PLAIN_OBJECTIVE = (str, type(None))


def _is_real(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def checked_proposal(value: object) -> Proposal:
    """``value`` if it is a well-typed `Proposal` (made plain), else a `LearnerFailure`.

    Well-typed: ``admit`` a bool, ``objective`` None or a str, ``priority_hint``
    None or a real number (a non-finite one is later ignored by the core). A
    `LearnerFailure` always rejects; its ``reason`` must be a str. Nothing a
    learner returns can make this raise: reading an attribute that raises is a
    failure too, and a coroutine (an ``async`` answer where a plain one is due)
    is closed and refused.
    """
    try:
        if type(value) is Proposal:
            v: Any = value  # a learner's fields are read untyped (`_rebuilt`)
            admit, objective, hint = v.admit, v.objective, v.priority_hint
            if type(admit) is bool and type(hint) in _PLAIN_HINT and type(objective) in _PLAIN_OBJECTIVE:
                return value  # the common case, checked without a call
        return _rebuilt(value)
    except Exception as exc:  # noqa: BLE001 - a raising answer is a learner failure (module doc)
        return _failure(type(exc).__name__, exc)


def _bad_field(rule: str, value: object) -> LearnerFailure:
    return _failure("TypeError", f"Proposal.{rule}, got {_text(value, repr)}")


def _rebuilt(value: object) -> Proposal:
    """A plain `Proposal` or `LearnerFailure` from ``value``, or a failure naming the bad field.

    The fields are read as ``Any``, never as their declared types: the learner may have put
    anything there, and the compiled build would check a typed read, raising its own error
    instead of naming the field as the pure build does.
    """
    v: Any = value
    if isinstance(value, LearnerFailure):
        reason, kind = v.reason, LearnerTimeout if isinstance(value, LearnerTimeout) else LearnerFailure
        if isinstance(reason, str):
            return kind(reason=str.__str__(reason)[:_REASON_CAP])
        return _failure("TypeError", f"LearnerFailure.reason must be a str, got {type(reason).__name__}")
    if not isinstance(value, Proposal):
        if inspect.iscoroutine(value):
            value.close()  # never run: an unawaited coroutine would warn at collection
        return _failure("TypeError", f"propose returned {type(value).__name__}, not a Proposal")
    admit, objective, hint = v.admit, v.objective, v.priority_hint
    if type(admit) is not bool:
        return _bad_field("admit must be a bool", admit)
    if objective is not None and not isinstance(objective, str):
        return _bad_field("objective must be a str or None", objective)
    if hint is not None and not _is_real(hint):
        return _bad_field("priority_hint must be a real number or None", hint)
    try:
        as_float = None if hint is None else float(hint)
    except OverflowError:  # an int beyond float range: non-finite, ignored like inf
        as_float = math.inf
    plain = None if objective is None else str.__str__(objective)  # a str subclass's overrides never run
    return Proposal(admit=admit, objective=plain, priority_hint=as_float)


def usable_proposal(value: object) -> Proposal:
    """`checked_proposal`, and a non-finite hint ignored (recorded as none): it ranks like none
    and stays JSON-safe. What the decision core acts on."""
    p = checked_proposal(value)
    h = p.priority_hint
    if h is None or -math.inf < h < math.inf:
        return p
    return Proposal(admit=p.admit, objective=p.objective, priority_hint=None)


_REJECT = Proposal(admit=False)
_NO_ERROR: Mapping[str, str] = MappingProxyType({})


def traced_proposal(p: Proposal) -> tuple[Proposal, Mapping[str, str]]:
    """How a usable proposal is traced: a failure as what it is, a reject, with ``learner_error``."""
    if isinstance(p, LearnerFailure):
        return _REJECT, MappingProxyType({"learner_error": p.reason})
    return p, _NO_ERROR


def reject_reason(p: Proposal) -> str:
    """The reason of a reject the learner decided: ``learner``, ``learner-timeout`` or
    ``learner-error: <ExceptionType>`` (the type only: reasons are metrics labels)."""
    if isinstance(p, LearnerTimeout):
        return "learner-timeout"
    if isinstance(p, LearnerFailure):
        return f"learner-error: {p.reason.partition(':')[0]}"
    return "learner"


def failure_from(exc: BaseException) -> LearnerFailure:
    """The proposal that stands in for a learner that raised ``exc``."""
    return _failure(type(exc).__name__, exc)
