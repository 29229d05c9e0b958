"""The physical redline replayed from a trace's ``sample`` records, for RL's justification clauses.

Theory of operation
-------------------
A ``demote`` cites a sample (its resource and ``sample_time``); whether that
sample justified it is recomputable from the trace alone, because the
redline's rule is stated by the contract's ``headroom`` block (DESIGN §10)
and every sample it acted on is traced. Per resource this replays, over the
resource's *fresh* samples (a ``sample_time`` newer than every earlier one;
a stale or duplicate one changes nothing, as the redline ignores it):

* the EWMA ``Ĥ ← α·H + (1 − α)·Ĥ`` (the first sample sets Ĥ = H);
* the trend ``dĤ/dt`` over the samples' own timestamps and the projection
  ``Ĥ + horizon·dĤ/dt``;
* the hysteresis: the resource *fires* when ``min(Ĥ, projection) < h_min``
  and stays firing until ``min(Ĥ, projection) ≥ h_min + margin`` with at
  least ``dwell`` fresh samples since it began.

It is written here from the design's text, not imported from the enforcer
(`rvguard.enforce.redline`), so a redline that computes it wrongly is caught
rather than agreed with. The arithmetic is the same float operations in the
same order, so a compliant trace is judged as the Guard decided it.

Each resource keeps its readings for the samples of the last ``staleness``
seconds (a cited sample older than that fails RL on its age first), so a
cited ``sample_time`` is looked up exactly: one no recorded sample has is
not a reading at all. Memory O(samples within the staleness bound).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ..runbook_spec import HeadroomSpec, ResourceSpec

__all__ = ["Reading", "ResourceReplay", "replays", "why_not_firing"]


@dataclass(frozen=True, slots=True)
class Reading:
    """The redline on one resource right after one of its fresh samples."""

    sample_time: float
    smoothed: float  # Ĥ
    projected: float  # Ĥ + horizon·dĤ/dt
    firing: bool


class ResourceReplay:
    """One resource's EWMA, trend and hysteresis, replayed (module doc)."""

    __slots__ = ("_alpha", "_dwell", "_fired_at", "_horizon", "count", "last", "limit", "recent", "slope")

    def __init__(self, limit: ResourceSpec | None, spec: HeadroomSpec) -> None:
        self.limit = limit
        self._alpha, self._horizon, self._dwell = spec.alpha, spec.horizon, spec.dwell
        self.last: Reading | None = None
        self.slope = 0.0
        self.count = 0  # fresh samples seen
        self._fired_at = 0
        self.recent: deque[Reading] = deque()  # the readings within the staleness bound, oldest first

    @property
    def firing(self) -> bool:
        """The resource fires now (after its last fresh sample)."""
        return self.last is not None and self.last.firing

    def observe(self, value: float, sample_time: float, now: float, staleness: float) -> None:
        """Take one fresh sample (the caller checked it is newer than the last)."""
        last = self.last
        if last is None:
            smoothed, slope = value, 0.0
        else:
            smoothed = self._alpha * value + (1.0 - self._alpha) * last.smoothed
            slope = (smoothed - last.smoothed) / (sample_time - last.sample_time)
        self.slope, self.count = slope, self.count + 1
        projected = smoothed + self._horizon * slope
        low = min(smoothed, projected)
        firing = last is not None and last.firing
        limit = self.limit
        if limit is None:  # a resource the contract states no limits for never fires
            pass
        elif not firing:
            if low < limit.h_min:
                firing, self._fired_at = True, self.count
        elif low >= limit.h_min + limit.margin and self.count - self._fired_at >= self._dwell:
            firing = False
        self.last = Reading(sample_time, smoothed, projected, firing)
        self.recent.append(self.last)
        while len(self.recent) > 1 and now - self.recent[0].sample_time > staleness:
            self.recent.popleft()

    def cited(self, sample_time: float) -> Reading | None:
        """The reading of the recorded sample taken at ``sample_time`` (``None``: none kept has it)."""
        for r in reversed(self.recent):
            if r.sample_time == sample_time:
                return r
            if r.sample_time < sample_time:
                break
        return None


def replays(spec: HeadroomSpec) -> dict[str, ResourceReplay]:
    """A replay per resource the contract's ``headroom`` block states (others are added as their
    samples come, with no limits: they never fire, and only their sample times are looked up)."""
    return {name: ResourceReplay(limit, spec) for name, limit in spec.resources.items()}


def why_not_firing(r: Reading, limit: ResourceSpec) -> str:
    """Why a reading does not fire, in the redline's terms (for a witness's detail)."""
    if math.isnan(r.smoothed):  # pragma: no cover - a sample's value is a number
        return "no headroom"
    return (
        f"Ĥ = {r.smoothed:g} and its projection {r.projected:g} leave it clear of h_min = {limit.h_min:g} "
        f"(the redline's hysteresis does not fire on it)"
    )
