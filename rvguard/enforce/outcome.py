"""How a request submitted to the `Guard` ended, and the Guard's and its core's own counters
(plain records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .dispatchers import Response

__all__ = ["CoreStatistics", "GuardStatistics", "Outcome", "Status"]

Status = Literal["completed", "rejected", "dropped", "failed", "preempted"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a submitted request ended (``preempted``: stopped to shed load; retry after ``retry_after`` s)."""

    rid: str
    status: Status
    reason: str = ""
    response: Response | None = None
    error: BaseException | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class GuardStatistics:
    """The Guard's own counters next to the core's (``uncertain`` is the core's, repeated here)."""

    submitted: int
    unauthenticated_rejects: int
    live: int
    tasks: int
    in_flight: int
    queue_depth: int
    sink_errors: int
    uncertain: int
    learner_timeouts: int = 0


@dataclass(frozen=True, slots=True)
class CoreStatistics:
    """A snapshot of the core's counters (trio-style ``statistics()``)."""

    arrived: int
    admitted_floor: int
    admitted_surplus: int
    admitted_demoted: int
    rejected: int
    dispatched: int
    completed: int
    dropped: int
    failed: int
    uncertain: int
    in_flight: int
    queue_depth: int
    max_queue_depth: int
    alerts: int
    floor_scale: float
    held: int = 0
    demoted: int = 0
    restored: int = 0
    evicted: int = 0
