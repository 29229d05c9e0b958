"""Several replicas' traces merged into one, in time order (for `rvguard check TRACE TRACE …`).

Theory of operation
-------------------
Each guard replica writes its own trace, in non-decreasing time on a shared
clock (Unix-anchored), with rids namespaced by its replica id. The fleet is
judged on the merge: a k-way merge by (t, source, line), lazy (memory O(k)
for k traces), so AF counts every replica's floor credits in one window and
the per-request properties see each request's events in order.

Nothing is dropped or reordered silently: a record a reader could not parse
is passed on where it stood, pinned to its file and line; an event earlier
than the one before it *in its own file* is replaced by a `TraceOrderError`
at that file and line (the merge would otherwise hide the disorder).

Cost: O(log k) per record; memory O(k).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence

from ..errors import TraceError, TraceOrderError
from ..events import Event

__all__ = ["Located", "merge_traces"]

#: (path, line, the event or the error found there)
Located = tuple[str, int, Event | TraceError]


class _Source:
    """One trace being merged: its records, its last time, its index (tie-break)."""

    __slots__ = ("index", "last", "path", "records")

    def __init__(self, index: int, path: str, records: Iterable[tuple[int, Event | TraceError]]) -> None:
        self.index = index
        self.path = path
        self.records = iter(records)
        self.last = float("-inf")

    def next(self) -> tuple[float, int, int, Located] | None:
        """The next heap entry ``(t, source, line, located)``, or None at the end."""
        for line, item in self.records:
            if isinstance(item, TraceError):
                err = item if item.line else item.located(path=self.path, line=line)
                return self.last, self.index, line, (self.path, line, err)
            if item.t < self.last:
                msg = f"t={item.t!r} is earlier than the previous event's t={self.last!r} in this trace"
                err = TraceOrderError(msg, path=self.path, line=line, field="t")
                return self.last, self.index, line, (self.path, line, err)
            self.last = item.t
            return item.t, self.index, line, (self.path, line, item)
        return None


def merge_traces(
    sources: Sequence[tuple[str, Iterable[tuple[int, Event | TraceError]]]],
) -> Iterator[Located]:
    """Merge ``(path, records)`` sources by time; ties keep the sources' order, then line order.

    Args:
        sources: per trace, its path and its ``(line, event-or-error)`` records
            (what `rvguard.io.iter_records` yields).

    Yields:
        ``(path, line, item)`` in merged order; errors pinned to their file and line.
    """
    heap: list[tuple[float, int, int, Located]] = []
    states = [_Source(i, path, recs) for i, (path, recs) in enumerate(sources)]
    for s in states:
        entry = s.next()
        if entry is not None:
            heap.append(entry)
    heapq.heapify(heap)
    while heap:
        _, index, _, located = heap[0]
        entry = states[index].next()
        if entry is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, entry)
        yield located
