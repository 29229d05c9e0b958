"""The rids that have ended: a request id is used once, for the whole life of a core (WF).

WF allows one ``arrive`` per rid in a whole trace, so the decision core must
refuse a rid that already had its terminal event, not only a live one; it
cannot forget a finished rid. `SpentRids` remembers them compactly:

* a rid written as a prefix and a canonical decimal counter (``g0``, ``g1``,
  ``req-17``; no leading zero) joins a run of consecutive numbers for its
  prefix once a neighbour number is spent: runs grow at both ends, and
  numbers that end out of order wait in a small set until the run reaches
  them. Counters that end roughly in order (the gateway's ``g<n>``, the
  simulator's ``r<n>``) cost O(1) memory in all, plus what is out of order;
* any other rid (a UUID, a counter spent out of order with no neighbour) is
  kept as a string: about 100 bytes each for short ASCII rids (the str
  object, 49 bytes + its length, and its share of the hash table).

Cost: O(1) amortised per `add` and per membership test (one ``rstrip`` and
one ``int`` of the counter).
"""

from __future__ import annotations

from typing import Final

__all__ = ["SpentRids"]

_DIGITS: Final = "0123456789"
_MAX_DIGITS: Final = 18  # counters beyond this are kept as strings (a rid is not a bignum)


def _counter(rid: str, prefix: str) -> int:
    """The counter of ``rid`` = ``prefix`` + its decimal digits, or -1 when not canonical."""
    digits = rid[len(prefix) :]
    if not digits or len(digits) > _MAX_DIGITS or (digits[0] == "0" and len(digits) > 1):
        return -1
    return int(digits)


class _Run:
    """Spent counters of one prefix: the interval ``[lo, hi)`` and the strays outside it."""

    __slots__ = ("hi", "lo", "strays")

    def __init__(self, n: int) -> None:
        self.lo = n
        self.hi = n + 1
        self.strays: set[int] = set()


class SpentRids:
    """A set of rids that only grows (``add``, ``in``, ``len``), stored as module doc says."""

    __slots__ = ("_count", "_loose", "_runs", "_strings")

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        self._strings: set[str] = set()
        self._loose: dict[str, int] = {}  # prefix -> counter rids of it kept as strings
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, rid: str) -> bool:
        if rid in self._strings:
            return True
        prefix = rid.rstrip(_DIGITS)
        run = self._runs.get(prefix)
        if run is None:
            return False
        digits = rid[len(prefix) :]  # _counter inlined: this runs on every arrival
        if not digits or len(digits) > _MAX_DIGITS or (digits[0] == "0" and len(digits) > 1):
            return False
        n = int(digits)
        return run.lo <= n < run.hi or n in run.strays

    def add(self, rid: str) -> None:
        """Remember ``rid`` (a no-op when it is already spent)."""
        if rid in self._strings:
            return
        prefix = rid.rstrip(_DIGITS)
        n = _counter(rid, prefix)
        if n < 0:
            self._strings.add(rid)
            self._count += 1
            return
        run = self._runs.get(prefix)
        if run is None:
            self._add_loose(rid, prefix, n)
        elif n == run.hi and n + 1 not in run.strays and not self._loose.get(prefix):
            run.hi += 1  # the common case: the next counter in order
        elif run.lo <= n < run.hi or n in run.strays:
            return
        else:
            if not (n == run.hi or n == run.lo - 1):
                run.strays.add(n)
            self._grow(prefix, run, n)
        self._count += 1

    def _add_loose(self, rid: str, prefix: str, n: int) -> None:
        """A counter rid whose prefix has no run yet: a run if a neighbour is spent, else a string."""
        if self._near(prefix, n):
            self._grow(prefix, self._runs.setdefault(prefix, _Run(n)), n)
        else:
            self._strings.add(rid)
            self._loose[prefix] = self._loose.get(prefix, 0) + 1

    def _near(self, prefix: str, n: int) -> bool:
        if not self._loose.get(prefix):
            return False
        below = n > 0 and f"{prefix}{n - 1}" in self._strings  # counters are ≥ 0: "g-1" is not g's
        return below or f"{prefix}{n + 1}" in self._strings

    def _take(self, prefix: str, run: _Run, n: int) -> bool:
        """Move ``n`` out of the strays or the strings (it joins the interval); False if not spent."""
        if n in run.strays:
            run.strays.remove(n)
            return True
        if not self._loose.get(prefix):
            return False
        rid = f"{prefix}{n}"
        if rid in self._strings:
            self._strings.remove(rid)
            self._loose[prefix] -= 1
            return True
        return False

    def _grow(self, prefix: str, run: _Run, n: int) -> None:
        """``n`` was just spent: extend the interval through it and every spent neighbour."""
        if n == run.hi:
            run.hi += 1
        elif n == run.lo - 1:
            run.lo -= 1
        while self._take(prefix, run, run.hi):
            run.hi += 1
        while run.lo > 0 and self._take(prefix, run, run.lo - 1):
            run.lo -= 1

    def footprint(self) -> tuple[int, int]:
        """``(rids kept as strings, counters kept one by one)``: what the memory grows with."""
        return len(self._strings), sum(len(r.strays) for r in self._runs.values())
