"""The decision core's ready queue: admitted requests waiting for a slot, floor and surplus apart.

Theory of operation
-------------------
The core dispatches the waiting request with the smallest key (true tier,
floor before surplus, learner hint, arrival sequence; or arrival alone under
FIFO). The reserved buffer (DESIGN §10, contract field ``reserve`` R) adds one
rule: a surplus request (admitted on any basis but ``floor``) may take a slot
only while fewer than C − R surplus requests hold one. Floor work may take
any of the C slots.

Keeping floor and surplus work in two heaps makes that rule one comparison
at each dispatch: the next request is the smaller of the two heads, and the
surplus head is simply not a candidate while the surplus share is full. A
blocked surplus head therefore never stands in front of floor work, and the
order among the candidates is exactly the one-heap order (the keys are the
same; the two heads are the two smallest of their halves).

Entries are removed lazily: a request that left the queue another way (a
drop, a cancellation) stays in its heap until it reaches a head, where
``alive`` says to skip it; `compact` rebuilds a heap that is more than half
dead.

Cost: O(log n) per push and pop (amortised over the lazy deletions); memory
O(n) entries.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["Key", "ReadyQueue", "rank"]

T = TypeVar("T")
#: a waiting request's rank: (tier, 0 floor | 1 surplus, learner hint, arrival sequence)
Key = tuple[int, int, float, int]


def rank(tier: int, surplus: bool, hint: float | None, seq: int, *, fifo: bool = False) -> Key:
    """A waiting request's key: by true tier, floor before surplus, then (surplus only) the
    learner's hint, then arrival; under ``fifo`` by arrival alone (the ablation of DESIGN §7)."""
    if fifo:
        return (0, 0, 0.0, seq)
    return (tier, 1, hint or 0.0, seq) if surplus else (tier, 0, 0.0, seq)


class ReadyQueue(Generic[T]):
    """Waiting requests in two heaps, floor and surplus (see module doc).

    Args:
        alive: whether an entry still waits (``False``: it left the queue, skip it).
    """

    __slots__ = ("_alive", "_floor", "_surplus")

    def __init__(self, alive: Callable[[T], bool]) -> None:
        self._alive = alive
        self._floor: list[tuple[Key, T]] = []
        self._surplus: list[tuple[Key, T]] = []

    def push(self, key: Key, entry: T, *, surplus: bool) -> None:
        """Queue ``entry`` at rank ``key``, with the surplus work when ``surplus``."""
        heapq.heappush(self._surplus if surplus else self._floor, (key, entry))

    def pop(self, *, surplus_room: bool) -> T | None:
        """Take the smallest-keyed waiting entry; surplus work only when ``surplus_room``.

        Returns ``None`` when nothing may be dispatched: no floor work waits and
        either no surplus work waits or the surplus share is full.
        """
        floor, alive, pop = self._floor, self._alive, heapq.heappop
        while floor and not alive(floor[0][1]):  # lazy deletion: drop the dead heads
            pop(floor)
        if surplus_room:
            surplus = self._surplus
            while surplus and not alive(surplus[0][1]):
                pop(surplus)
            if surplus and (not floor or surplus[0][0] < floor[0][0]):
                return pop(surplus)[1]
        return pop(floor)[1] if floor else None

    def peek_surplus(self) -> T | None:
        """The smallest-keyed waiting surplus entry, left in place (``None``: none waits)."""
        surplus, alive = self._surplus, self._alive
        while surplus and not alive(surplus[0][1]):
            heapq.heappop(surplus)
        return surplus[0][1] if surplus else None

    def take_surplus(self, keep: Callable[[T], bool] = lambda _: False) -> list[T]:
        """Remove every waiting surplus entry but those ``keep`` keeps, and return them in rank order
        (the redline holds them)."""
        alive = self._alive
        live = sorted(item for item in self._surplus if alive(item[1]))
        self._surplus[:] = [item for item in live if keep(item[1])]  # sorted: still a heap
        return [entry for _, entry in live if not keep(entry)]

    def __len__(self) -> int:
        """Items held, dead ones not yet removed included."""
        return len(self._floor) + len(self._surplus)

    def __iter__(self) -> Iterator[T]:
        """The live entries, floor work first (in heap order, not rank order)."""
        return (e for heap in (self._floor, self._surplus) for _, e in heap if self._alive(e))

    def compact(self, live: int) -> None:
        """Rebuild the heaps without dead items once they hold more than twice ``live`` items."""
        if len(self) > 64 and len(self) > 2 * live:
            for heap in (self._floor, self._surplus):
                heap[:] = [item for item in heap if self._alive(item[1])]
                heapq.heapify(heap)

    def clear(self) -> None:
        """Forget every item."""
        self._floor.clear()
        self._surplus.clear()
