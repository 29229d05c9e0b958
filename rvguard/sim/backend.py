"""A continuous-batching backend: a running request's progress depends on the batch as it changes.

Theory of operation
-------------------
On a vLLM-style server the C slots are not C independent servers. One
engine runs steps; each decode step advances every running sequence by one
token and takes longer the larger the batch; a newly dispatched request
first needs its prefill (work proportional to its prompt), during which the
sequences already running make no progress. So a request's service is not
drawn when it starts: it is what the batch does while it runs. That is the
coupling the reference study names (A3 strained: the flood inflates the
assured service) and what makes capacity finite (μ_sat).

`BatchingBackend` integrates this exactly between events (a fluid version of
the step loop: between two events the batch is constant, so every decoder
advances at the same rate):

* a request dispatched at t joins the prefill queue with work
  ``f·(prefill + prefill_per_token·p)`` seconds (p prompt tokens, f its
  noise factor); while any prefill is pending, the engine prefills (FIFO)
  and the decoders wait;
* otherwise each of the n decoders advances at ``(m/n) / step_time(m)``
  tokens per second, ``m = min(n, batch_cap)`` sequences decoded per step,
  ``step_time(m) = step + step_per_seq·m``; a request needs ``f·ℓ`` tokens;
* when its tokens are done it leaves the engine and, ``overhead`` seconds
  later (HTTP, detokenisation, the client), its slot is free: that is the
  completion the guard sees.

f is a mean-one lognormal factor (σ), clamped to [min_factor, max_factor]:
per-request variation in the cost of its tokens. ``batch_cap`` < C
time-shares the decode (the capacity-drop knob).

`BackendModel`'s defaults are the reference study's 2×V100 node, fitted to
its figures (`CALIBRATION`; docs/simulator.md tabulates the fit);
`rvguard.sim.profiles` loads the second profile, fitted to the real vLLM
CPU engine by ``rvguard calibrate``. The validation models
(`ExponentialService`, `LognormalService`, `DeterministicService`) are
independent per-request draws, the M/G/c queue ciw checks.

Cost: O(n) per event for n ≤ C requests in flight; memory O(C).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "CALIBRATION",
    "Backend",
    "BackendModel",
    "BatchingBackend",
    "CalibrationPoint",
    "DeterministicService",
    "ExponentialService",
    "IndependentBackend",
    "LognormalService",
    "ServiceModel",
]


class Backend(Protocol):
    """The running batch as the simulator drives it: start, ask when next, advance."""

    @property
    def in_flight(self) -> int:
        """Requests holding a slot."""
        ...

    def start(self, rid: str, tokens: int, prompt_tokens: int | None, now: float) -> None:
        """Dispatch ``rid`` (``tokens`` output tokens, ``prompt_tokens`` prompt) at ``now``."""
        ...

    def next_time(self) -> float | None:
        """When the next request may end (None: nothing running)."""
        ...

    def advance(self, now: float) -> list[str]:
        """Run to ``now``; the requests whose slot is free by then, in completion order."""
        ...


class ServiceModel(Protocol):
    """What the simulator needs of a service model: a fresh backend for one run."""

    @property
    def slots(self) -> int | None:
        """C the model was built for (None: any)."""
        ...

    def backend(self, rng: random.Random) -> Backend:
        """A backend drawing its noise from ``rng`` (the run's one random source)."""
        ...


class IndependentBackend:
    """Each request's service drawn when it starts, independent of the others (an M/G/c server)."""

    def __init__(self, model: _Independent, rng: random.Random) -> None:
        self._model = model
        self._rng = rng
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._running: set[str] = set()

    @property
    def in_flight(self) -> int:
        """Requests holding a slot."""
        return len(self._running)

    def start(self, rid: str, tokens: int, prompt_tokens: int | None, now: float) -> None:
        """Draw ``rid``'s service; it ends that long after ``now``."""
        if rid in self._running:
            raise ValueError(f"request {rid!r} is already running")
        self._running.add(rid)
        heapq.heappush(
            self._heap, (now + self._model.draw(tokens, len(self._running), self._rng), next(self._seq), rid)
        )

    def next_time(self) -> float | None:
        """The earliest completion."""
        return self._heap[0][0] if self._heap else None

    def advance(self, now: float) -> list[str]:
        """Every request whose service ended by ``now``."""
        out: list[str] = []
        while self._heap and self._heap[0][0] <= now:
            rid = heapq.heappop(self._heap)[2]
            self._running.discard(rid)
            out.append(rid)
        return out


class _Independent(Protocol):
    def draw(self, tokens: int, n: int, rng: random.Random) -> float: ...


@dataclass(frozen=True, slots=True)
class ExponentialService:
    """Independent exponential service at rate ``mu``: the M/M/c model, for validation."""

    mu: float
    slots: int | None = None

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """An exponential draw; ignores size and batch (no coupling)."""
        return rng.expovariate(self.mu)

    def backend(self, rng: random.Random) -> Backend:
        """Independent draws."""
        return IndependentBackend(self, rng)


@dataclass(frozen=True, slots=True)
class LognormalService:
    """Independent lognormal service, log-space ``mu`` and ``sigma``: an M/G/c model, for validation."""

    mu: float
    sigma: float
    slots: int | None = None

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """A lognormal draw (ciw's ``Lognormal(mu, sigma)``); ignores size and batch."""
        return rng.lognormvariate(self.mu, self.sigma)

    def backend(self, rng: random.Random) -> Backend:
        """Independent draws."""
        return IndependentBackend(self, rng)


@dataclass(frozen=True, slots=True)
class DeterministicService:
    """A constant service time: the M/D/c model, for validation."""

    value: float
    slots: int | None = None

    def draw(self, tokens: int, n: int, rng: random.Random) -> float:
        """Always ``value``."""
        return self.value

    def backend(self, rng: random.Random) -> Backend:
        """Independent draws."""
        return IndependentBackend(self, rng)


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    """One figure from the reference study, and how close the model must come.

    Attributes:
        name: what was measured (`rvguard.sim.calibration.measure` defines each).
        target: the reference value (seconds, or requests/s for throughput).
        tolerance: allowed relative error of the model's value.
    """

    name: str
    target: float
    tolerance: float


CALIBRATION: tuple[CalibrationPoint, ...] = (
    CalibrationPoint("batch1_median_16", 0.236, 0.05),
    CalibrationPoint("light_mean_16", 0.386, 0.20),
    CalibrationPoint("flood_mean_16", 0.460, 0.12),
    CalibrationPoint("batchC_mean_16", 0.183 + 0.0149 * 16, 0.05),
    CalibrationPoint("batchC_mean_48", 0.183 + 0.0149 * 48, 0.05),
    CalibrationPoint("mu_sat", 9.6, 0.05),
    CalibrationPoint("marquee_max_16", 0.601, 0.15),
)


@dataclass(frozen=True, slots=True)
class BackendModel:
    """A continuous-batching engine's parameters (defaults: the reference study's 2×V100, C = 4).

    Attributes:
        slots: C, the concurrent sequences the server runs.
        overhead: seconds a request holds its slot outside the engine (HTTP, detokenisation).
        prefill: engine seconds of one prefill at the profile's reference prompt.
        prefill_per_token: engine seconds per prompt token on top of ``prefill``.
        step: decode step time at batch 0 (the intercept), seconds.
        step_per_seq: added step time per sequence in the batch, seconds.
        sigma: log-space standard deviation of the per-request cost factor.
        min_factor, max_factor: the factor's clamp.
        batch_cap: sequences decoded per step (None = all); below C it cuts throughput.
        name: the profile's name (reported with results).
    """

    slots: int = 4
    overhead: float = 0.014733
    prefill: float = 0.042067
    prefill_per_token: float = 0.0
    step: float = 0.0099667
    step_per_seq: float = 0.0012333
    sigma: float = 0.08
    min_factor: float = 0.85
    max_factor: float = 1.35
    batch_cap: int | None = None
    name: str = "study-v100"

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"need slots ≥ 1, got {self.slots}")
        if self.batch_cap is not None and self.batch_cap < 1:
            raise ValueError(f"batch_cap must be ≥ 1, got {self.batch_cap!r}")
        params = (
            self.overhead,
            self.prefill,
            self.prefill_per_token,
            self.step,
            self.step_per_seq,
            self.sigma,
        )
        if min(params) < 0 or not all(math.isfinite(x) for x in params):
            raise ValueError("service parameters must be finite and non-negative")
        if self.step + self.step_per_seq <= 0:
            raise ValueError("a decode step must take time (step + step_per_seq > 0)")
        if not 0 < self.min_factor <= 1.0 <= self.max_factor:
            raise ValueError(
                f"need 0 < min_factor ≤ 1 ≤ max_factor, got {self.min_factor}, {self.max_factor}"
            )

    def step_time(self, n: int) -> float:
        """Seconds of one decode step with ``n`` sequences running (``batch_cap`` of them decoded)."""
        m = n if self.batch_cap is None else min(n, self.batch_cap)
        return self.step + self.step_per_seq * max(m, 1)

    def decode_rate(self, n: int) -> float:
        """Tokens per second each of ``n`` running sequences advances."""
        m = n if self.batch_cap is None else min(n, self.batch_cap)
        return (m / n) / self.step_time(n)

    def prefill_time(self, prompt_tokens: int | None) -> float:
        """Engine seconds of one prefill (no noise)."""
        return self.prefill + self.prefill_per_token * (prompt_tokens or 0)

    def factor(self, rng: random.Random) -> float:
        """One request's mean-one lognormal cost factor, clamped."""
        f = math.exp(self.sigma * rng.gauss(0.0, 1.0) - self.sigma**2 / 2)
        return min(max(f, self.min_factor), self.max_factor)

    def mean_base(self, tokens: int, n: int, prompt_tokens: int | None = None) -> float:
        """Service of ``n`` requests dispatched together, each ``tokens`` long (no noise).

        Their prefills run first (n of them), then they decode as one batch:
        the clean same-batch service the study's 183 + 14.9·ℓ ms line measures.
        """
        decode = max(tokens, 1) / self.decode_rate(n)
        return self.overhead + n * self.prefill_time(prompt_tokens) + decode

    def backend(self, rng: random.Random) -> BatchingBackend:
        """A fresh engine for one run."""
        return BatchingBackend(self, rng)


class BatchingBackend:
    """The engine's state: prefill queue, decoding batch, requests leaving (module doc).

    Args:
        model: the engine's parameters.
        rng: the run's one random source (the cost factors).
    """

    def __init__(self, model: BackendModel, rng: random.Random) -> None:
        self.model = model
        self._rng = rng
        self._t = 0.0
        self._prefill: deque[tuple[str, float]] = deque()  # (rid, its prefill's engine seconds)
        self._head_left = 0.0  # engine seconds left of the head prefill
        self._work: dict[str, float] = {}  # rid → tokens to decode once prefilled
        self._decode: dict[str, float] = {}  # rid → tokens left
        self._leave: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._rates: dict[int, float] = {}

    def _rate(self, n: int) -> float:
        rate = self._rates.get(n)
        if rate is None:
            rate = self._rates[n] = self.model.decode_rate(n)
        return rate

    @property
    def in_flight(self) -> int:
        """Requests holding a slot: prefilling, decoding or leaving."""
        return len(self._prefill) + len(self._decode) + len(self._leave)

    def start(self, rid: str, tokens: int, prompt_tokens: int | None, now: float) -> None:
        """``rid`` joins the prefill queue at ``now``."""
        if rid in self._work or rid in self._decode or any(r == rid for _, _, r in self._leave):
            raise ValueError(f"request {rid!r} is already running")
        self._run_until(now)
        f = self.model.factor(self._rng)
        work = f * self.model.prefill_time(prompt_tokens)
        if not self._prefill:
            self._head_left = work
        self._prefill.append((rid, work))
        self._work[rid] = f * max(tokens, 1)

    def _engine_next(self) -> float | None:
        if self._prefill:
            return self._t + max(self._head_left, 0.0)
        if self._decode:
            return self._t + max(min(self._decode.values()), 0.0) / self._rate(len(self._decode))
        return None

    def next_time(self) -> float | None:
        """The earliest of the engine's next transition and the next slot freed."""
        times = [
            t for t in (self._engine_next(), self._leave[0][0] if self._leave else None) if t is not None
        ]
        return min(times) if times else None

    def _integrate(self, until: float) -> None:
        dt = until - self._t
        if dt <= 0:
            return
        if self._prefill:
            self._head_left -= dt
        elif self._decode:
            done = dt * self._rate(len(self._decode))
            for rid in self._decode:
                self._decode[rid] -= done
        self._t = until

    def _transition(self) -> None:
        """The engine's next transition, due now: the head prefill ends, or the shortest decode does."""
        if self._prefill:
            rid, _ = self._prefill.popleft()
            self._decode[rid] = self._work.pop(rid)
            self._head_left = self._prefill[0][1] if self._prefill else 0.0
            return
        least = min(self._decode.values())
        for rid in [r for r, left in self._decode.items() if left <= least + 1e-9]:
            del self._decode[rid]
            heapq.heappush(self._leave, (self._t + self.model.overhead, next(self._seq), rid))

    def _run_until(self, now: float) -> None:
        while (te := self._engine_next()) is not None and te <= now:
            self._integrate(te)
            self._transition()
        self._integrate(now)

    def advance(self, now: float) -> list[str]:
        """Run the engine to ``now``; the requests whose slot is free by then."""
        self._run_until(now)
        out: list[str] = []
        while self._leave and self._leave[0][0] <= now:
            out.append(heapq.heappop(self._leave)[2])
        return out
