"""Closed-loop profiling of a backend: the (load, latency) samples a latency predictor is fitted on.

Why closed loop: the reference study fits its learner (a least-squares
latency predictor, 132 samples, R² = 0.992) on latencies measured against
load. A closed-loop profiling run keeps exactly n requests outstanding: each
completion issues the next at once, so every sample is the latency a request
sees at load n — its service at batch min(n, C) plus, beyond C, its wait in
the server's queue. Latency is then close to linear in n (service grows
with the batch up to C, the queue adds ≈ s/C per request beyond it), which
is why a straight line fits it as well as the study's did. A fit on service
alone (the previous calibration) sees no queue: its line is nearly flat and
its shedding threshold sits far beyond any on-time load.

`PROFILE_LOADS` × `PER_LOAD` = 12 × 11 = 132 samples, the study's count
(it does not say at which loads; 1…3C spans its batch and queue regimes).

Cost: O(samples · C) per load; the backend's own cost per event.
"""

from __future__ import annotations

import itertools
import random
from collections import deque

from .backend import ServiceModel

__all__ = ["PER_LOAD", "closed_loop", "profile_samples"]

PER_LOAD = 11
WARMUP_ROUNDS = 2  # completions skipped per unit of load, so each load starts from its own steady state


def closed_loop(
    model: ServiceModel, rng: random.Random, load: int, count: int, *, slots: int, tokens: int = 16
) -> list[float]:
    """``count`` latencies at ``load`` outstanding requests (FIFO beyond ``slots``), after a warm-up."""
    if load < 1 or count < 1:
        raise ValueError(f"need load ≥ 1 and count ≥ 1, got {load}, {count}")
    backend = model.backend(rng)
    waiting: deque[str] = deque()
    issued: dict[str, float] = {}
    names = (f"p{k}" for k in itertools.count())

    def issue(now: float) -> None:
        rid = next(names)
        issued[rid] = now
        waiting.append(rid)

    def fill(now: float) -> None:
        while waiting and backend.in_flight < slots:
            backend.start(waiting.popleft(), tokens, None, now)

    for _ in range(load):
        issue(0.0)
    fill(0.0)
    skip = WARMUP_ROUNDS * load
    out: list[float] = []
    while len(out) < count:
        t = backend.next_time()
        assert t is not None  # load ≥ 1 requests are always outstanding
        for rid in backend.advance(t):
            latency = t - issued.pop(rid)
            if skip:
                skip -= 1
            else:
                out.append(latency)
            issue(t)
        fill(t)
    return out[:count]


def profile_samples(
    model: ServiceModel, rng: random.Random, *, slots: int, tokens: int = 16, per_load: int = PER_LOAD
) -> list[tuple[float, float]]:
    """(load, latency) pairs at loads 1 … 3C, ``per_load`` each: the learner's training set."""
    return [
        (float(n), x)
        for n in range(1, 3 * slots + 1)
        for x in closed_loop(model, rng, n, per_load, slots=slots, tokens=tokens)
    ]
