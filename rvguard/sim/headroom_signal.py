"""A seeded headroom signal with the faults real exporters have: noise, glitches, jitter, repeats.

The runbook's tuning method for the redline's α is a simulation against the system's own glitch
duration and noise profile. `SignalModel` states that profile; `quiet_run` draws a run with no
real pressure (every firing on it is a false trigger) and `surge_run` one where the true headroom
ramps down through ``h_min`` at a known time (the lag is measured from that crossing).

* each sample is ``true headroom + N(0, noise)``, clipped to [0, 1];
* sample times are ``period`` apart, each jittered uniformly by ± ``jitter`` (14.8 s, 15.2 s …);
* with probability ``glitch_rate`` a glitch starts: for ``glitch_length`` samples the reading is
  ``glitch_depth`` lower (a GC pause, an allocation burst: the raw level drops, then returns);
* with probability ``duplicate_rate`` a sample is sent again with its own timestamp, and with
  ``stale_rate`` an older sample is sent again (both must change nothing in the redline).

All randomness comes from the ``random.Random`` passed in (STYLE 12). Pure; O(n) per run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..enforce.redline import HeadroomSample

__all__ = ["SignalModel", "Surge", "quiet_run", "surge_run"]


@dataclass(frozen=True, slots=True)
class SignalModel:
    """The noise and fault profile of one exporter (module doc)."""

    level: float = 0.5
    noise: float = 0.03
    period: float = 15.0
    jitter: float = 0.3
    glitch_rate: float = 0.02
    glitch_depth: float = 0.45
    glitch_length: int = 1
    duplicate_rate: float = 0.05
    stale_rate: float = 0.02

    def __post_init__(self) -> None:
        for name in ("level", "noise", "glitch_rate", "glitch_depth", "duplicate_rate", "stale_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        if not 0.0 <= self.jitter < self.period / 2:
            raise ValueError(f"jitter must be in [0, period/2), got {self.jitter!r}")
        if self.glitch_length < 1:
            raise ValueError(f"glitch_length must be ≥ 1, got {self.glitch_length!r}")


@dataclass(frozen=True, slots=True)
class Surge:
    """A real pressure episode: the true headroom falls linearly from ``start`` to ``low``.

    ``crossing`` is when the true headroom reaches ``h_min`` (the lag's origin).
    """

    start: float
    ramp: float
    low: float
    crossing: float


def _draw(
    model: SignalModel, rng: random.Random, n: int, truth: list[float], resource: str
) -> list[HeadroomSample]:
    out: list[HeadroomSample] = []
    glitch = 0
    for i in range(n):
        t = i * model.period + rng.uniform(-model.jitter, model.jitter)
        if glitch == 0 and rng.random() < model.glitch_rate:
            glitch = model.glitch_length
        drop = model.glitch_depth if glitch else 0.0
        glitch = max(0, glitch - 1)
        value = min(1.0, max(0.0, truth[i] - drop + rng.gauss(0.0, model.noise)))
        out.append(HeadroomSample(resource, value, t))
        if rng.random() < model.duplicate_rate:
            out.append(HeadroomSample(resource, value, t))
        if len(out) > 2 and rng.random() < model.stale_rate:
            old = out[rng.randrange(len(out) - 1)]
            out.append(HeadroomSample(resource, old.value, old.t))
    return out


def quiet_run(
    model: SignalModel, rng: random.Random, n: int, *, resource: str = "kv_cache"
) -> list[HeadroomSample]:
    """``n`` scrapes of a node with no real pressure (the true headroom stays at ``level``)."""
    return _draw(model, rng, n, [model.level] * n, resource)


def surge_run(
    model: SignalModel,
    rng: random.Random,
    n: int,
    *,
    h_min: float,
    ramp: float = 120.0,
    low: float = 0.05,
    resource: str = "kv_cache",
) -> tuple[list[HeadroomSample], Surge]:
    """``n`` scrapes with a surge starting in the run's second quarter (module doc)."""
    if not low < h_min < model.level:
        raise ValueError(f"need low < h_min < level, got {low!r}, {h_min!r}, {model.level!r}")
    start = rng.uniform(n / 4, n / 2) * model.period
    crossing = start + ramp * (model.level - h_min) / (model.level - low)

    def true_at(t: float) -> float:
        if t <= start:
            return model.level
        return max(low, model.level - (model.level - low) * (t - start) / ramp)

    truth = [true_at(i * model.period) for i in range(n)]
    return _draw(model, rng, n, truth, resource), Surge(start, ramp, low, crossing)
