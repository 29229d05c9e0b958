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

import math
import random
from collections.abc import Collection, Mapping, Sequence
from typing import Literal, Protocol

from ..contract import Contract
from ..events import Proposal
from ..proposal import LearnerFailure as LearnerFailure
from ..proposal import LearnerTimeout as LearnerTimeout
from .answers import LoadView as LoadView
from .answers import checked_proposal as checked_proposal
from .answers import failure_from as failure_from
from .answers import reject_reason as reject_reason
from .answers import traced_proposal as traced_proposal
from .answers import usable_proposal as usable_proposal
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


class Learner(Protocol):
    """An untrusted admission/routing policy."""

    def propose(self, request: Request, view: LoadView) -> Proposal:
        """Propose admit/reject, an objective and a priority hint for ``request``."""
        ...


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


_ADMIT_ALL = Proposal(admit=True)  # proposals are frozen: one object serves every answer
_REJECT = Proposal(admit=False)


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
