"""Time is injected (STYLE rule 11): the one module that reads the system clock.

`Clock` is what the `Guard` and the HTTP dispatcher ask for the time;
`MonotonicClock` serves live runs, `ManualClock` tests and replays. The
decision core never sees a clock: it takes ``now`` as an argument.
`WallClock` is Unix time, for what is dated outside the process (a signed
claim's expiry): never the guard's scheduling time, which starts at the
contract's epoch on every start-up, unless the guard is one replica of several
(`MonotonicClock.unix_anchored`).
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "MonotonicClock", "WallClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of non-decreasing time in seconds."""

    def now(self) -> float:
        """The current time in seconds."""
        ...


class MonotonicClock:
    """Live time: ``start`` plus the seconds elapsed since construction (``time.monotonic``).

    The contract's windows start at its epoch, so ``start`` is where this
    clock puts the guard on the contract's time line (default 0.0: the
    guard's first instant is the epoch).
    """

    __slots__ = ("_base", "_start", "origin")

    def __init__(self, start: float = 0.0, *, origin: float | None = None) -> None:
        self._start = start
        self._base = time.monotonic()
        #: the Unix time of this clock's 0 (a trace segment's header records it)
        self.origin = time.time() - start if origin is None else origin

    def now(self) -> float:
        """``start`` + elapsed monotonic seconds."""
        return self._start + (time.monotonic() - self._base)

    @classmethod
    def unix_anchored(cls) -> MonotonicClock:
        """Monotonic, starting at the Unix time of its construction.

        For guard replicas whose traces are merged and whose windows are shared (a
        credit pool): their clocks must share a base, so each starts from Unix time
        and then runs monotonically (a step of the system clock moves none of them).
        """
        return cls(start=time.time(), origin=0.0)

    @classmethod
    def since(cls, origin: float) -> MonotonicClock:
        """Monotonic, starting at the seconds elapsed since the Unix time ``origin``.

        For a gateway restarted on an existing trace: its time goes on from the first
        run's time line (and window grid) instead of starting again at 0.
        """
        return cls(start=max(time.time() - origin, 0.0), origin=origin)


class WallClock:
    """Unix time (``time.time``): seconds since 1970, shared with other machines.

    Not monotonic (the system may step it); use it only to compare against
    times written by someone else, such as a claim's ``exp``.
    """

    __slots__ = ()

    def now(self) -> float:
        """Seconds since the Unix epoch."""
        return time.time()


class ManualClock:
    """Time that moves only when told to: for tests and deterministic replays."""

    __slots__ = ("_t",)

    def __init__(self, start: float = 0.0) -> None:
        self._t = start

    def now(self) -> float:
        """The time set so far."""
        return self._t

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (≥ 0); returns the new time."""
        if not seconds >= 0.0:
            raise ValueError(f"a clock cannot go backwards: advance({seconds!r})")
        self._t += seconds
        return self._t

    def set(self, t: float) -> None:
        """Jump to ``t`` (not earlier than now)."""
        if not t >= self._t:
            raise ValueError(f"a clock cannot go backwards: set({t!r}) at {self._t!r}")
        self._t = t
