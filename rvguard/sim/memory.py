"""A memory-pressure model: an engine whose KV cache grows with the tokens its requests generate.

Theory of operation
-------------------
A running request holds its prompt's KV and one more token's for each token it generates, until
it ends (DESIGN §10: S(t) = prompt + generated). `KVCache` keeps S per running request and moves
time in steps: each step every running request generates ``token_rate · dt`` tokens, up to its
own output length, when it has finished. Headroom is the fraction of ``capacity`` still free, the
signal an exporter's ``1 − vllm:kv_cache_usage_perc`` gives. A stopped request (preempted) frees
its S at once.

The model is the one the livelock needs, no more: the decode rate does not depend on the batch
(`rvguard.sim.backend` has the batch coupling; here the pressure is the point), and a cache past
its capacity is not refused (the headroom reads 0; the guard's relief is what must act).

`PressureModel.sustainable` is the level the engine holds: how many requests can run to completion
together without the cache crossing a level, at their largest (prompt plus output).

Pure, deterministic; O(n) per step for n running requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError

__all__ = ["KVCache", "PressureModel"]


@dataclass(frozen=True, slots=True)
class PressureModel:
    """The engine and the clients of a memory-pressure run (validated at construction).

    Attributes:
        capacity: the KV cache's size in tokens.
        token_rate: tokens each running request generates per second.
        prompt_tokens: each request's prompt.
        output_tokens: each request's output (its ``max_tokens``; the contract's cap still applies).
        clients: closed-loop surplus clients (each sends its next request when the last one ends).
        assured_clients: closed-loop clients of the first floored tenant.
        interval: seconds between two headroom samples.
        tick: the time step.
        retry_after: seconds a client waits before it retries a request the guard ended.
        duration: seconds the clients keep sending.
    """

    capacity: int
    token_rate: float = 20.0
    prompt_tokens: int = 200
    output_tokens: int = 120
    clients: int = 6
    assured_clients: int = 1
    interval: float = 0.5
    tick: float = 0.05
    retry_after: float = 1.0
    duration: float = 60.0

    def __post_init__(self) -> None:
        for name in ("capacity", "output_tokens", "clients"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"{name} must be a whole number >= 1, got {value!r}", field=name, value=value)
        for name in ("prompt_tokens", "assured_clients"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(f"{name} must be a whole number >= 0, got {value!r}", field=name, value=value)
        for name in ("token_rate", "interval", "tick", "duration"):
            value = getattr(self, name)
            if not 0.0 < value < math.inf:
                raise SpecError(f"{name} must be finite and > 0, got {value!r}", field=name, value=value)
        if not 0.0 <= self.retry_after < math.inf:
            raise SpecError(
                f"retry_after must be finite, >= 0, got {self.retry_after!r}", field="retry_after"
            )

    @property
    def footprint(self) -> int:
        """Tokens one request holds at its largest."""
        return self.prompt_tokens + self.output_tokens

    @property
    def service(self) -> float:
        """Seconds one request runs, uninterrupted."""
        return self.output_tokens / self.token_rate

    def sustainable(self, level: float) -> int:
        """Requests that run to completion together with the headroom staying at or above ``level``."""
        return math.floor((1.0 - level) * self.capacity / self.footprint)


class KVCache:
    """The running requests' KV state (module doc)."""

    __slots__ = ("_running", "capacity", "rate")

    def __init__(self, capacity: int, token_rate: float) -> None:
        self.capacity = capacity
        self.rate = token_rate
        self._running: dict[str, list[float]] = {}  # rid -> [prompt, generated, output]

    def start(self, rid: str, prompt_tokens: int, output_tokens: int) -> None:
        """``rid`` starts running (its prompt's KV is taken at once)."""
        self._running[rid] = [float(prompt_tokens), 0.0, float(output_tokens)]

    def stop(self, rid: str) -> None:
        """``rid`` stopped or ended: its KV is freed (a no-op when it is not running)."""
        self._running.pop(rid, None)

    def step(self, dt: float) -> list[str]:
        """Generate for ``dt`` seconds; the rids that finished their output, in start order."""
        done: list[str] = []
        for rid, held in self._running.items():
            held[1] = min(held[2], held[1] + self.rate * dt)
            if held[1] >= held[2]:
                done.append(rid)
        return done

    def generated(self, rid: str) -> int:
        """Tokens ``rid`` has generated so far (0 when it is not running)."""
        held = self._running.get(rid)
        return 0 if held is None else math.floor(held[1])

    @property
    def used(self) -> float:
        """Tokens held now."""
        return sum(p + g for p, g, _ in self._running.values())

    @property
    def growth(self) -> int:
        """Tokens the running requests will still generate."""
        return math.ceil(sum(out - g for _, g, out in self._running.values()))

    @property
    def headroom(self) -> float:
        """The fraction of the cache free, in [0, 1]."""
        return min(1.0, max(0.0, 1.0 - self.used / self.capacity))
