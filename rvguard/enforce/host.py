"""What the Guard's relief loops may use of the Guard, as a protocol (so they import no Guard).

`rvguard.enforce.pressure.HeadroomLoop`, `rvguard.enforce.emergency.EmergencyChannel` and
`rvguard.enforce.voluntary.VoluntaryChannel` run inside the Guard and act through it. Typed
against `ReliefHost` instead of the `Guard` class, they sit below the Guard in the import graph,
type-checking imports included: the Guard builds them, they never import it.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..clock import Clock
from ..contract import Contract
from ..events import Event
from .core import DecisionCore
from .preemption import Preemption
from .redline import HeadroomSample
from .request import Request

__all__ = ["ReliefHost"]


class ReliefHost(Protocol):
    """The Guard as its relief loops see it (`rvguard.enforce.guard.Guard` is one)."""

    contract: Contract
    core: DecisionCore
    preemption: Preemption

    @property
    def clock(self) -> Clock: ...

    def running(self) -> list[str]: ...

    def request(self, rid: str) -> Request | None: ...

    def preempt(self, rid: str, *, grace: float | None = None, resource: str = "") -> float: ...

    def evict_now(self, rid: str, state: int, reason: str, **decided: Any) -> bool: ...

    def observe_headroom(self, sample: HeadroomSample) -> None: ...

    def _handle(self, events: list[Event]) -> None:
        """The Guard's delivery of the core's events (sinks, waiting callers): what relief decided
        in the core reaches the trace through it."""
