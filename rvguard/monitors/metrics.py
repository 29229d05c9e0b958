"""Trace metrics (DESIGN §3): the records, and the one definition of their ratios.

"Assured" means a request of a floored tenant (floor B > 0). A request's
outcome is *judged* once it has a terminal event or once observed time has
passed its deadline; later deadlines are open and counted in neither the
numerator nor the denominator. On time means a ``complete`` at t ≤ D(R).

The offline checker computes the same numbers from columns; tests hold the
two to exact agreement (utilisation, a float sum, added in the same order: the same float).

The online accumulation is `rvguard.monitors.accounting` (a module of its
own so that the compiled build can compile it, issue 16: this one holds
records whose annotations name numpy-backed types it imports only for the
type checker).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .p95 import SojournP95

__all__ = ["Metrics", "ServiceStats", "WindowRow"]

# per-window counter columns (`rvguard.monitors.accounting` counts them in this order)
WINDOW_COLUMNS = ("offered", "entitled", "admitted", "rejected", "on_time", "missed")


@dataclass(frozen=True, slots=True)
class ServiceStats:
    """Observed services (complete - dispatch) of one class, against the envelope."""

    count: int
    min: float | None
    max: float | None
    below_lower: int
    above_ceiling: int


@dataclass(frozen=True, slots=True)
class WindowRow:
    """Counts for one tenant in one contract window, by arrival window."""

    tenant: str
    window: int
    start: float
    offered: int
    entitled: int
    admitted: int
    rejected: int
    on_time: int
    missed: int


@dataclass(frozen=True)
class Metrics:
    """The metrics of DESIGN §3 for one trace (see the module docstring for terms).

    The three ratios are derived from their counts here, so the online and
    the offline path cannot compute them differently.
    """

    events: int
    requests: int
    first_t: float | None
    last_t: float | None
    entitled: int
    entitled_attained: int
    floor_attainment: float | None = field(init=False)
    admitted_judged: int
    admitted_missed: int
    admitted_miss: float | None = field(init=False)
    offered_judged: int
    offered_unmet_count: int
    offered_unmet: float | None = field(init=False)
    max_assured_backlog: int
    open_requests: int
    utilisation: float | None
    service_assured: ServiceStats
    service_opportunistic: ServiceStats
    assured_sojourn_p95: SojournP95
    windows: tuple[WindowRow, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "floor_attainment", ratio(self.entitled_attained, self.entitled))
        object.__setattr__(self, "admitted_miss", ratio(self.admitted_missed, self.admitted_judged))
        object.__setattr__(self, "offered_unmet", ratio(self.offered_unmet_count, self.offered_judged))

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the ``metrics`` object of ``check --json``)."""
        return asdict(self)


def ratio(num: int, den: int) -> float | None:
    """``num / den``, or None when nothing was judged (shared by the online and offline paths)."""
    return None if den == 0 else num / den
