"""A continuous-batching backend model, calibrated to the reference study (DESIGN §7).

Why this shape: on a vLLM-style server the C slots are not independent
servers. All sequences in flight share each decode step, so a request's
service grows with the batch it runs in, and every new arrival's prefill
stalls the decodes already running. Both couplings matter for the guard: the
first makes the flood service (≈ 460 ms) longer than the light one
(≈ 386 ms), the second makes a long tail. A plain M/G/c model has neither.

The model, for a request of ℓ output tokens dispatched when ``n`` sequences
(itself included) are in flight:

* mean base service ``a(n) + b(n)·ℓ``, with ``a`` and ``b`` interpolated
  between the batch-1 point (``a1 + b1·ℓ``, 236 ms at ℓ = 16) and the
  batch-C point (``aC + bC·ℓ``) by ``w(n) = ((n − 1)/(C_ref − 1))^γ``;
* times a mean-one lognormal factor (σ), clamped below at ``min_factor`` so
  no service falls far under the batch-1 time (the DR lower bound L);
* plus ``stall`` seconds each time another request is dispatched while it
  runs (prefill interference: its completion is pushed back);
* capacity degradation: with ``batch_cap`` < n, the decode is time-shared
  and the base service is multiplied by ``n / batch_cap``.

`CALIBRATION` lists the reference points with the tolerance the tests hold
the model to; docs/simulator.md shows the model against them.

Cost: O(1) per service draw; O(n) per dispatch for the stall update.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "CALIBRATION",
    "Backend",
    "BackendModel",
    "CalibrationPoint",
    "DeterministicService",
    "ExponentialService",
    "LognormalService",
    "ServiceModel",
]


class ServiceModel(Protocol):
    """What `Backend` needs: a service draw and the per-dispatch stall."""

    @property
    def stall(self) -> float:
        """Seconds each co-running dispatch adds to a running request."""
        ...

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """One service time for ``tokens`` output tokens at batch ``n``."""
        ...


@dataclass(frozen=True, slots=True)
class ExponentialService:
    """Independent exponential service at rate ``mu``: the M/M/c model, for validation."""

    mu: float
    stall: float = 0.0

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """An exponential draw; ignores size and batch (no coupling)."""
        return rng.expovariate(self.mu)


@dataclass(frozen=True, slots=True)
class LognormalService:
    """Independent lognormal service, log-space ``mu`` and ``sigma``: an M/G/c model, for validation."""

    mu: float
    sigma: float
    stall: float = 0.0

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """A lognormal draw (ciw's ``Lognormal(mu, sigma)``); ignores size and batch."""
        return rng.lognormvariate(self.mu, self.sigma)


@dataclass(frozen=True, slots=True)
class DeterministicService:
    """A constant service time: the M/D/c model, for validation."""

    value: float
    stall: float = 0.0

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """Always ``value``."""
        return self.value


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    """One figure from the reference study, and how close the model must come.

    Attributes:
        name: what was measured.
        target: the reference value (seconds, or requests/s for throughput).
        tolerance: allowed relative error of the model's value.
    """

    name: str
    target: float
    tolerance: float


CALIBRATION: tuple[CalibrationPoint, ...] = (
    CalibrationPoint("batch1_median_16", 0.236, 0.05),
    CalibrationPoint("light_mean_16", 0.386, 0.12),
    CalibrationPoint("flood_mean_16", 0.460, 0.10),
    CalibrationPoint("ceiling_p999_16", 0.660, 0.12),
    CalibrationPoint("batchC_mean_16", 0.183 + 0.0149 * 16, 0.10),
    CalibrationPoint("batchC_mean_48", 0.183 + 0.0149 * 48, 0.10),
    CalibrationPoint("mu_sat", 9.6, 0.10),
)


@dataclass(frozen=True, slots=True)
class BackendModel:
    """Parameters of the backend (defaults: the reference study's 2×V100 node, C = 4).

    Attributes:
        slots: C, the concurrent sequences the server runs.
        a1, b1: batch-1 service ``a1 + b1·ℓ`` (seconds, seconds/token).
        a_c, b_c: batch-``c_ref`` service, before stalls.
        c_ref: the batch size the batch-C point was measured at.
        gamma: curvature of the interpolation in n (< 1: early batching costs most).
        sigma: lognormal noise (log-space standard deviation).
        min_factor: lower clamp of the noise factor.
        stall: seconds each co-running dispatch adds (prefill interference).
        batch_cap: sequences decoded at once (None = all); below C it cuts throughput.
    """

    slots: int = 4
    a1: float = 0.068
    b1: float = 0.0105
    a_c: float = 0.150
    b_c: float = 0.0149
    c_ref: int = 4
    gamma: float = 0.5
    sigma: float = 0.12
    min_factor: float = 0.85
    stall: float = 0.016
    batch_cap: int | None = None

    def __post_init__(self) -> None:
        if self.slots < 1 or self.c_ref < 2:
            raise ValueError(f"need slots ≥ 1 and c_ref ≥ 2, got {self.slots}, {self.c_ref}")
        if self.batch_cap is not None and self.batch_cap < 1:
            raise ValueError(f"batch_cap must be ≥ 1, got {self.batch_cap!r}")
        if min(self.a1, self.b1, self.a_c, self.b_c, self.sigma, self.stall, self.gamma) < 0:
            raise ValueError("service parameters must be non-negative")

    def mean_base(self, tokens: int, n: int) -> float:
        """Mean service before stalls and noise, for ``tokens`` output tokens at batch ``n``."""
        w = float(((max(n, 1) - 1) / (self.c_ref - 1)) ** self.gamma)
        a = self.a1 + w * (self.a_c - self.a1)
        b = self.b1 + w * (self.b_c - self.b1)
        base = a + b * max(tokens, 1)
        if self.batch_cap is not None and n > self.batch_cap:
            base *= n / self.batch_cap
        return base

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """One service time (no stalls): mean-one lognormal noise on `mean_base`."""
        factor = math.exp(self.sigma * rng.gauss(0.0, 1.0) - self.sigma**2 / 2)
        return self.mean_base(tokens, n) * max(factor, self.min_factor)


class Backend:
    """The running batch: who is in flight and when each will finish.

    The simulator calls `start` on every dispatch and `end` on every
    completion. `start` returns the completion times that changed (the new
    request's, and those a prefill stall pushed back); the simulator
    reschedules them, so a stale completion carries an old ``version``.

    Args:
        model: the service model.
        rng: the simulation's one random source.
    """

    def __init__(self, model: ServiceModel, rng: random.Random) -> None:
        self.model = model
        self._rng = rng
        self._finish: dict[str, tuple[float, int]] = {}
        self._version = 0

    @property
    def in_flight(self) -> int:
        """Sequences running now."""
        return len(self._finish)

    def start(self, rid: str, tokens: int, now: float) -> list[tuple[str, float, int]]:
        """Dispatch ``rid`` at ``now``: ``(rid, finish time, version)`` for each changed completion."""
        if rid in self._finish:
            raise ValueError(f"request {rid!r} is already running")
        changed: list[tuple[str, float, int]] = []
        stall = self.model.stall
        if stall > 0.0:  # without a stall no running completion moves: nothing to reschedule
            for other, (t_end, _) in self._finish.items():
                self._version += 1
                self._finish[other] = (t_end + stall, self._version)
                changed.append((other, t_end + stall, self._version))
        n = len(self._finish) + 1
        self._version += 1
        t_end = now + self.model.draw(tokens, n, self._rng)
        self._finish[rid] = (t_end, self._version)
        changed.append((rid, t_end, self._version))
        return changed

    def current(self, rid: str, version: int) -> bool:
        """True if ``version`` is ``rid``'s latest scheduled completion."""
        entry = self._finish.get(rid)
        return entry is not None and entry[1] == version

    def end(self, rid: str) -> None:
        """``rid`` left the batch."""
        del self._finish[rid]
