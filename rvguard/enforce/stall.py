"""The loop watchdog: a stalled event loop is recorded in the trace, never invisible.

Everything the Guard times (deadlines, a learner's timeout, a request's trace stamps) runs on one
event loop; code that blocks it (a learner's blocking call, a slow sink, a large parse) delays
all of it, and the trace, stamped by the same loop, would not show it: a request whose client
waited 1.9 s can read 0.03 s in the trace. The watchdog is a task that sleeps ``period`` seconds
and measures how late it woke (on the monotonic clock); a wake-up later than ``threshold``
is a ``stall`` record (`rvguard.events.Stall`: ``lag``, ``since``) handed to the Guard's sinks
with the Guard's clock time, and counted (`stalls`, `longest`) for ``/metrics``.

Cost: one wake-up every ``period`` seconds (default 50 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from ..clock import Clock
from ..events import Event, Stall

__all__ = ["DEFAULT_STALL_THRESHOLD", "LoopWatchdog"]

log = logging.getLogger("rvguard.enforce")

#: seconds late a wake-up must be to count as a stall: above a busy loop's ordinary jitter
DEFAULT_STALL_THRESHOLD = 0.1


class LoopWatchdog:
    """Records the event loop's stalls (module doc).

    Args:
        emit: where a ``stall`` event goes (the Guard's sinks).
        clock: the Guard's clock (the record's ``t`` and ``since``).
        period: seconds between two wake-ups.
        threshold: seconds late that make a stall; ``None``: the watchdog never runs.

    Attributes:
        stalls: stalls recorded.
        longest: the longest lag seen, seconds.
    """

    def __init__(
        self,
        emit: Callable[[list[Event]], None],
        clock: Clock,
        *,
        period: float = 0.05,
        threshold: float | None = DEFAULT_STALL_THRESHOLD,
    ) -> None:
        if not (0.0 < period < float("inf") and (threshold is None or 0.0 < threshold < float("inf"))):
            raise ValueError(f"period and threshold must be positive seconds, got {period!r}, {threshold!r}")
        self._emit = emit
        self._clock = clock
        self.period = period
        self.threshold = threshold
        self.stalls = 0
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None
        self._last = 0.0  # when the watchdog last woke (monotonic)

    def start(self) -> None:
        """Run on the running loop (unless there is no threshold)."""
        if self._task is None and self.threshold is not None:
            self._last = time.monotonic()  # a loop blocked before the task first runs is a stall too
            self._task = asyncio.get_running_loop().create_task(self._run(), name="rvguard-stall-watchdog")

    async def stop(self) -> None:
        """Cancel and wait."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            now = time.monotonic()
            lag, self._last = now - self._last - self.period, now
            if lag > (self.threshold or 0.0):
                self._stalled(lag)

    def _stalled(self, lag: float) -> None:
        self.stalls += 1
        self.longest = max(self.longest, lag)
        now = self._clock.now()
        log.warning(
            "event loop stalled %.3f s (something blocked it)", lag, extra={"event": "loop_stall", "lag": lag}
        )
        try:
            self._emit([Stall(t=now, lag=lag, since=max(0.0, now - lag))])
        except Exception:
            log.exception("the stall record could not be written", extra={"event": "loop_stall"})
