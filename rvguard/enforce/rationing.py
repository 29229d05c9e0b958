"""Rationed relief: take only what the floor needs, give back only what the headroom holds.

Theory of operation
-------------------
Bare preemption past the hard floor used to stop *every* running surplus request, and a redline
that cleared restored *every* held one at once. Against an engine whose KV use grows with its
running requests that is a livelock: everything restarts together, grows together, crosses the
floor together and is stopped together, and no surplus request ever completes (issue 24). This
module is the pure arithmetic that replaces both "all"s; the core (`rvguard.enforce.demotion`)
and the runtime (`rvguard.enforce.pressure`, `rvguard.sim.relief`) carry its answers out.

* **Preempt the fewest** (`preempt_fewest`): headroom is short of the floor by
  ``(floor − Ĥ)·capacity`` state tokens, less the relief already in flight (requests stopped whose
  release no fresh sample has measured yet). Candidates are ranked as the emergency channel ranks
  them (`rvguard.enforce.eviction.rank`: S descending, then rid; protected requests never), and the
  plan takes them off the top until their states cover the shortfall. Taking the largest first is
  what makes it the fewest: no k requests free more than the k largest.
* **Give back gradually** (`restore_allowance`): held requests are restored in their rank order
  while their footprints (prompt plus the capped output: what each will hold at its largest) fit in
  the room above the level, ``(Ĥ − level)·capacity`` less what running and queued work is still
  committed to grow by; the first that does not fit stops the count (the ranking is never skipped to
  fit a smaller one). So each fresh sample restores at most what the headroom allows.
* **A bound on holding** (`ReliefConfig.hold_bound`): a request held longer than it is answered
  (``fail`` with reason `HOLD_BOUND`: the gateway's 503 with a retry signal) rather than left to its
  client's own time-out. The core ends it (`DemotionMixin.expire_held`); only surplus is ever held.

Units: headroom is a fraction of the resource, states and footprints are tokens, and ``capacity``
is the resource's size in tokens (the KV cache's), so a request's share is S / capacity.

Pure: no clock, no I/O. Cost: `preempt_fewest` O(n log n) for n candidates (the ranking);
`restore_allowance` O(m) for the m footprints looked at.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..errors import SpecError
from ..events import HOLD_BOUND as HOLD_BOUND
from .eviction import Candidate, rank

__all__ = [
    "DEFAULT_HOLD_BOUND",
    "HOLD_BOUND",
    "InFlight",
    "ReliefConfig",
    "preempt_fewest",
    "restore_allowance",
    "shortfall",
]

#: seconds a held request waits at most before it is answered (well under an SDK's default time-out)
DEFAULT_HOLD_BOUND = 10.0


@dataclass(frozen=True, slots=True)
class ReliefConfig:
    """Rationed relief's parameters (validated at construction).

    Attributes:
        capacity: the pressured resource's size in state tokens (the KV cache's); a request's
            share of headroom is its state / capacity.
        hold_bound: seconds a request may stay held before it is answered (`HOLD_BOUND`).
    """

    capacity: int
    hold_bound: float = DEFAULT_HOLD_BOUND

    def __post_init__(self) -> None:
        cap = self.capacity
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise SpecError(f"relief.capacity must be at least 1 token, got {cap!r}", field="relief.capacity")
        bound = self.hold_bound
        if isinstance(bound, bool) or not isinstance(bound, int | float) or not 0.0 < bound < math.inf:
            raise SpecError(
                f"relief.hold_bound must be finite seconds > 0, got {bound!r}", field="relief.hold_bound"
            )


def shortfall(headroom: float, floor: float, capacity: int, in_flight: int = 0) -> float:
    """State tokens headroom lacks to reach ``floor``, counting ``in_flight`` tokens of relief already
    issued and not yet measured (``<= 0``: nothing to take)."""
    return (floor - headroom) * capacity - in_flight


def preempt_fewest(
    candidates: Iterable[Candidate], *, headroom: float, floor: float, capacity: int, in_flight: int = 0
) -> tuple[str, ...]:
    """The fewest unprotected candidates, by the emergency ranking, whose states cover the shortfall
    (module doc); every unprotected candidate when even all of them do not."""
    need = shortfall(headroom, floor, capacity, in_flight)
    chosen: list[str] = []
    freed = 0
    for cand in rank(candidates):
        if freed >= need:
            break
        chosen.append(cand.rid)
        freed += cand.state
    return tuple(chosen)


def restore_allowance(
    footprints: Sequence[int], *, headroom: float, level: float, capacity: int, committed: int = 0
) -> int:
    """How many of ``footprints`` (held requests in rank order, tokens each at its largest) fit, as a
    prefix, in the room above ``level``, less ``committed`` tokens running and queued work will still
    grow by (module doc)."""
    room = (headroom - level) * capacity - committed
    used = 0
    for n, size in enumerate(footprints):
        used += size
        if used > room:
            return n
    return len(footprints)


class InFlight:
    """Preemptions whose relief no fresh sample has measured yet: credited to the shortfall, so a
    stop not yet seen is not answered by a second one (as `EvictionPlanner` credits evictions).

    Cost: O(1) per `add`, O(p) per `land` for p in flight; memory O(p).
    """

    __slots__ = ("_stops",)

    def __init__(self) -> None:
        self._stops: dict[str, tuple[str, int, float]] = {}  # rid -> (resource, state, stopped by)

    def add(self, rid: str, resource: str, state: int, by: float) -> None:
        """``rid`` (``state`` tokens of ``resource``) is stopped by time ``by``."""
        self._stops[rid] = (resource, state, by)

    def land(self, last_sample_time: Callable[[str], float]) -> None:
        """Forget each stop that a sample taken after it has measured."""
        for rid, (resource, _, by) in list(self._stops.items()):
            if last_sample_time(resource) > by:
                del self._stops[rid]

    @property
    def tokens(self) -> int:
        """The state tokens in flight."""
        return sum(state for _, state, _ in self._stops.values())
