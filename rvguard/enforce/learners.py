"""Untrusted learners: they only *propose* (admit/reject, objective, priority hint).

Whatever a learner returns, the decision core decides: an entitled request is
admitted anyway, the hint only orders the opportunistic surplus, and the
objective is recorded but never changes the true tenant. So the learners here
are deliberately unsafe, in the ways the reference study stresses:

* `AdmitAll` (overload), `RejectAll` (under-admission), `RandomLearner`
  (seeded noise);
* `LSQLearner`, the reference study's latency-SLO admitter: a least-squares
  fit of latency against load on calibration samples, the prediction scaled
  by a miscalibration β, shedding a request whose predicted latency exceeds
  its tenant's SLO. ``sheddable-only`` sheds only tenants marked sheddable
  (GAIE style: the unfloored ones); ``class-agnostic`` may shed anyone.
  β = 0 predicts zero latency (admits everything: overload); β ≫ 1 sheds
  nearly everything.

A learner can also be wrong in kind: raise, or return something that is not
a well-typed `Proposal`. `consult` turns that into a learner decision, a
`LearnerFailure` (reject the surplus, no hint, the reason kept), so a broken
learner costs only the surplus it decides, never the floor. Every driver of
the core (the `Guard`, the simulator) asks the learner through `consult`;
`DecisionCore.arrive` applies `checked_proposal` itself as well.
"""

from __future__ import annotations

import inspect
import math
import numbers
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Protocol

from ..contract import Contract
from ..events import Proposal
from .request import Request

__all__ = [
    "OWN_LEARNERS",
    "AdmitAll",
    "LSQLearner",
    "Learner",
    "LearnerFailure",
    "LearnerTimeout",
    "LoadView",
    "RandomLearner",
    "RejectAll",
    "checked_proposal",
    "consult",
    "failure_from",
    "fit_least_squares",
    "reject_reason",
    "traced_proposal",
    "usable_proposal",
]

LSQMode = Literal["sheddable-only", "class-agnostic"]


@dataclass(frozen=True, slots=True)
class LoadView:
    """What a learner may look at: the load now (read-only; the core owns the state)."""

    now: float
    in_flight: int
    queue_depth: int
    slots: int

    @property
    def load(self) -> int:
        """Outstanding admitted requests (running + queued)."""
        return self.in_flight + self.queue_depth


class Learner(Protocol):
    """An untrusted admission/routing policy."""

    def propose(self, request: Request, view: LoadView) -> Proposal:
        """Propose admit/reject, an objective and a priority hint for ``request``."""
        ...


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
            admit, objective, hint = value.admit, value.objective, value.priority_hint
            if type(admit) is bool and type(hint) in _PLAIN_HINT and type(objective) in _PLAIN_OBJECTIVE:
                return value  # the common case, checked without a call
        return _rebuilt(value)
    except Exception as exc:  # noqa: BLE001 - a raising answer is a learner failure (module doc)
        return _failure(type(exc).__name__, exc)


def _bad_field(rule: str, value: object) -> LearnerFailure:
    return _failure("TypeError", f"Proposal.{rule}, got {_text(value, repr)}")


def _rebuilt(value: object) -> Proposal:
    """A plain `Proposal` or `LearnerFailure` from ``value``, or a failure naming the bad field."""
    if isinstance(value, LearnerFailure):
        reason, kind = value.reason, LearnerTimeout if isinstance(value, LearnerTimeout) else LearnerFailure
        if isinstance(reason, str):
            return kind(reason=str.__str__(reason)[:_REASON_CAP])
        return _failure("TypeError", f"LearnerFailure.reason must be a str, got {type(reason).__name__}")
    if not isinstance(value, Proposal):
        if inspect.iscoroutine(value):
            value.close()  # never run: an unawaited coroutine would warn at collection
        return _failure("TypeError", f"propose returned {type(value).__name__}, not a Proposal")
    admit, objective, hint = value.admit, value.objective, value.priority_hint
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


def consult(learner: Learner, request: Request, view: LoadView) -> Proposal:
    """Ask ``learner`` about a read-only copy of ``request`` (`Request.read_only`; rvguard's own
    learners, `OWN_LEARNERS`, read the request itself); a raise (any `Exception`) or an
    ill-typed answer becomes a `LearnerFailure`.

    `BaseException` that is not an `Exception` (KeyboardInterrupt,
    asyncio.CancelledError, SystemExit) propagates: it is not the learner's
    decision but the process being stopped.
    """
    try:
        value = learner.propose(request if type(learner) in OWN_LEARNERS else request.read_only(), view)
    except Exception as exc:  # noqa: BLE001 - a learner failure is a learner decision (module doc)
        return failure_from(exc)
    return checked_proposal(value)


def failure_from(exc: BaseException) -> LearnerFailure:
    """The proposal that stands in for a learner that raised ``exc``."""
    return _failure(type(exc).__name__, exc)


_ADMIT_ALL = Proposal(admit=True)  # proposals are frozen: one object serves every answer


class AdmitAll:
    """Proposes admitting everything (the overload adversary)."""

    def propose(self, request: Request, view: LoadView) -> Proposal:
        """Always admit."""
        return _ADMIT_ALL


class RejectAll:
    """Proposes rejecting everything (the under-admission adversary)."""

    def propose(self, request: Request, view: LoadView) -> Proposal:
        """Always reject."""
        return _REJECT


class RandomLearner:
    """Random proposals from an injected `random.Random` (deterministic per seed).

    Args:
        rng: the randomness source.
        p_admit: probability of proposing admit.
        hint_range: priority hints drawn uniformly from this interval.
        objectives: objectives to claim (e.g. the assured class's name), drawn uniformly.
    """

    def __init__(
        self,
        rng: random.Random,
        *,
        p_admit: float = 0.5,
        hint_range: tuple[float, float] = (-1.0, 1.0),
        objectives: Sequence[str] = (),
    ) -> None:
        if not 0.0 <= p_admit <= 1.0:
            raise ValueError(f"p_admit must be in [0, 1], got {p_admit!r}")
        self._rng = rng
        self._p = p_admit
        self._lo, self._hi = hint_range
        self._objectives = tuple(objectives)

    def propose(self, request: Request, view: LoadView) -> Proposal:
        """A random admit bit, hint and (optionally) objective."""
        rng = self._rng
        objective = rng.choice(self._objectives) if self._objectives else None
        return Proposal(rng.random() < self._p, objective, rng.uniform(self._lo, self._hi))


def fit_least_squares(samples: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """Fit ``latency = a + b · load`` by ordinary least squares.

    Returns:
        ``(a, b, r2)``; with constant loads the slope is 0 and ``a`` the mean.

    Raises:
        ValueError: fewer than two samples.
    """
    n = len(samples)
    if n < 2:
        raise ValueError(f"need at least two calibration samples, got {n}")
    mx = math.fsum(x for x, _ in samples) / n
    my = math.fsum(y for _, y in samples) / n
    sxx = math.fsum((x - mx) ** 2 for x, _ in samples)
    sxy = math.fsum((x - mx) * (y - my) for x, y in samples)
    syy = math.fsum((y - my) ** 2 for _, y in samples)
    b = sxy / sxx if sxx > 0 else 0.0
    a = my - b * mx
    r2 = 1.0 if syy == 0 else max(0.0, 1.0 - math.fsum((y - a - b * x) ** 2 for x, y in samples) / syy)
    return a, b, r2


class LSQLearner:
    """The reference study's latency-predictor admitter (see module doc).

    Args:
        samples: calibration pairs (load, latency seconds).
        slo: per-tenant latency objective in seconds.
        beta: miscalibration multiplier on the prediction.
        mode: ``sheddable-only`` or ``class-agnostic``.
        sheddable: tenants the sheddable-only mode may shed.
    """

    def __init__(
        self,
        samples: Sequence[tuple[float, float]],
        *,
        slo: Mapping[str, float],
        beta: float = 1.0,
        mode: LSQMode = "sheddable-only",
        sheddable: Collection[str] = (),
    ) -> None:
        if mode not in ("sheddable-only", "class-agnostic"):
            raise ValueError(f"mode must be 'sheddable-only' or 'class-agnostic', got {mode!r}")
        if not beta >= 0.0:
            raise ValueError(f"beta must be ≥ 0, got {beta!r}")
        self.a, self.b, self.r2 = fit_least_squares(samples)
        self.beta = beta
        self.mode: LSQMode = mode
        self._slo = dict(slo)
        self._sheddable = frozenset(sheddable)

    @classmethod
    def from_contract(
        cls,
        contract: Contract,
        samples: Sequence[tuple[float, float]],
        *,
        beta: float = 1.0,
        mode: LSQMode = "sheddable-only",
    ) -> LSQLearner:
        """SLOs from the tenants' deadlines; the unfloored tenants are the sheddable ones."""
        slo = {n: t.deadline for n, t in contract.tenants.items()}
        shed = [n for n, t in contract.tenants.items() if not t.floored]
        return cls(samples, slo=slo, beta=beta, mode=mode, sheddable=shed)

    def predict(self, load: float) -> float:
        """β-scaled predicted latency at ``load`` outstanding requests."""
        return self.beta * (self.a + self.b * load)

    def propose(self, request: Request, view: LoadView) -> Proposal:
        """Shed when the prediction (with this request) exceeds the tenant's SLO."""
        predicted = self.predict(view.load + 1)
        may_shed = self.mode == "class-agnostic" or request.tenant in self._sheddable
        over = predicted > self._slo.get(request.tenant, math.inf)
        return Proposal(admit=not (may_shed and over), priority_hint=predicted)


#: rvguard's own learners, by exact type: O(1), no I/O, never write what they read
OWN_LEARNERS: tuple[type, ...] = (AdmitAll, RejectAll, RandomLearner, LSQLearner)
