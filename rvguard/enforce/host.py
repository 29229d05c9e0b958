"""What the Guard's relief loops ask of the runtime, as a protocol (so they import no Guard).

`rvguard.enforce.pressure.HeadroomLoop`, `rvguard.enforce.emergency.EmergencyChannel` and
`rvguard.enforce.voluntary.VoluntaryChannel` decide with the pure objects they are handed (the
`DecisionCore`, whose redline and relief decide, and the `Preemption` notices) and ask the runtime
only to *act*: read its clock, say what runs, stop, evict, feed a sample, deliver the events the
core decided. Typed against `ReliefHost` instead of the `Guard` class, they sit below the Guard in
the import graph, type-checking imports included, and never reach through the Guard into its
parts (STYLE 24): the Guard builds them and hands them what they need.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..clock import Clock
from ..events import Event
from .redline import HeadroomSample
from .request import Request

__all__ = ["ReliefHost"]


class ReliefHost(Protocol):
    """The runtime as its relief loops see it (`rvguard.enforce.guard.Guard` is one)."""

    @property
    def clock(self) -> Clock: ...

    def running(self) -> list[str]: ...

    def request(self, rid: str) -> Request | None: ...

    def preempt(self, rid: str, *, grace: float | None = None, resource: str = "") -> float: ...

    def evict_now(self, rid: str, state: int, reason: str, **decided: Any) -> bool: ...

    def observe_headroom(self, sample: HeadroomSample) -> None: ...

    def deliver(self, events: list[Event]) -> None:
        """Hand events the core decided (an expired hold, a hold bound) to the sinks and callers."""
