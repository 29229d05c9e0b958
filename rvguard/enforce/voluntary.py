"""The voluntary eviction channel in the Guard: the crossover rule, asked on every headroom poll.

Theory of operation
-------------------
The emergency channel (`rvguard.enforce.emergency`) acts only past the hard
floor. The voluntary one (the runbook's crossover, `EvictionPlanner.voluntary`)
may act on any poll of the `HeadroomLoop`, after the emergency channel: for
each running request the emergency channel may take (`EmergencyChannel.candidates`:
surplus this Guard admitted, not floor-entitled, not already being stopped), it
estimates the expected remaining seconds the request keeps its slot — its tokens
still allowed (``max_tokens`` as the core capped it, minus the tokens reported
so far through `EmergencyChannel.progress`) times ``token_seconds`` — and asks
the planner, largest expected remaining time first (then rid), whether keeping
it costs more than moving it:
``expected_remaining · opportunity_rate > fixed + per_token · S``, strictly.

What the channel may do: evict such a request — written as ``evict`` with
reason ``voluntary`` (and the dominant resource, its Ĥ, the target and the
capacity, as the emergency channel writes), then preempted at once with no
grace (the caller gets the retry signal). What it may not: evict an assured,
floor-entitled or protected request, or one this Guard did not admit (the
candidates exclude them and `Guard.evict_now` refuses them: PR); exceed the
planner's k evictions in flight or the link bucket, which it shares with the
emergency channel (its relief is credited there too, and lands the same way:
a fresh sample of the resource taken after the stop); act before any headroom
sample (no resource to land its relief on); act on a request whose output
budget is unknown (no ``max_tokens``): it then keeps it.

Cost per poll: O(n log n) for the n requests in flight (the ranking).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..runbook_events import VOLUNTARY
from .eviction import Candidate, Eviction, VoluntaryConfig

if TYPE_CHECKING:
    from .core import DecisionCore
    from .emergency import EmergencyChannel
    from .host import ReliefHost

__all__ = ["VoluntaryChannel"]


class VoluntaryChannel:
    """The crossover rule wired to one `Guard`, through its emergency channel's planner (module doc).

    Args:
        host: the runtime that stops what is evicted (`ReliefHost`; the Guard).
        emergency: the channel whose planner (k, link bucket, credit) and landing it shares.
        config: the crossover prices and the expected seconds per token.
        core: the decision core (its redline's view names the resource and the headroom).

    Attributes:
        evicted: requests this channel evicted.
    """

    def __init__(
        self, host: ReliefHost, emergency: EmergencyChannel, config: VoluntaryConfig, *, core: DecisionCore
    ) -> None:
        self._host, self._core = host, core
        self._emergency = emergency
        self.config = config
        self.evicted = 0

    def remaining(self, candidate: Candidate) -> float | None:
        """Expected seconds ``candidate`` still keeps its slot (``None``: its budget is unknown)."""
        request = self._host.request(candidate.rid)
        if request is None or request.max_tokens is None:
            return None
        return self.config.expected_remaining(request.max_tokens - candidate.generated)

    def act(self, now: float) -> list[Eviction]:
        """Evict, at ``now``, every running candidate the crossover rule and k and the bucket allow."""
        redline = self._core.redline
        view = None if redline is None else redline.view()
        if view is None:
            return []
        ranked = []
        for c in self._emergency.candidates():
            remaining = self.remaining(c)
            if remaining is not None:
                ranked.append((-remaining, c.rid, c))
        ranked.sort(key=lambda x: (x[0], x[1]))
        planner, issued = self._emergency.planner, []
        for neg, _, c in ranked:
            ev = planner.voluntary(now, c, self.config.cost, -neg)
            if ev is not None and self._emergency.stop(ev, VOLUNTARY, view.resource, view.smoothed, now):
                self.evicted += 1
                issued.append(ev)
        return issued
