"""The physical redline: smoothed headroom, its trend, and when surplus work is demoted.

Theory of operation
-------------------
Headroom H is the fraction of a resource still free (1 − ``vllm:kv_cache_usage_perc``, free
sequence slots, ...), read from engine telemetry as `HeadroomSample` records, each stamped with
its *own* time (the scrape's or the payload's). Per resource the redline keeps

* the EWMA ``Ĥ ← α·H + (1 − α)·Ĥ`` (the first sample sets Ĥ = H);
* its trend ``dĤ/dt = (Ĥ_new − Ĥ_old) / (t_new − t_old)`` over the *real* interval between two
  successive fresh samples, never a nominal scrape period: a scrape nominally every 15 s that
  lands at 14.8 s and 15.2 s gives the true slope, not a sawtooth (the runbook's jitter rule);
* the projection ``Ĥ + horizon·dĤ/dt``.

A sample whose time is not newer than the last fresh one of its resource (stale or duplicate)
changes nothing: a loop that ticks faster than its exporter refreshes cannot flap.

A resource *fires* when ``Ĥ < H_min`` or its projection is below ``H_min``; it *clears* only
when both Ĥ and the projection are at least ``H_min + margin`` and it has fired for at least
``dwell`` fresh samples (hysteresis). So a resource toggles at most ``2·⌈n / (dwell + 1)⌉``
times in n fresh samples, whatever the signal, and with ``horizon = 0`` a level-triggered
episode lasts at least ``margin / α`` samples (the EWMA moves Ĥ by at most α per sample).

Several resources, each with its own limits (`ResourceLimit`), make one redline: it fires while
any resource fires, and the *deciding* resource is the dominant one, the smallest slack
``min(Ĥ, projection) − H_min`` among those firing (among all when none fires). Below a
resource's ``hard_floor`` the redline reports a `HardFloorCrossing`: the signal on which
preemption or eviction may act. The redline itself only says *when*; what is demoted, and that
nothing is evicted by it, is the decision core's (`rvguard.enforce.core`).

Pure: no clock (time is each sample's own), no I/O. Cost: O(resources) per sample; memory
O(resources).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SpecError, TelemetryFormatError
from ..runbook_spec import HeadroomSpec

__all__ = [
    "HardFloorCrossing",
    "HeadroomSample",
    "HeadroomView",
    "Redline",
    "RedlineConfig",
    "RedlineReading",
    "ResourceLimit",
    "redline_config",
]


@dataclass(frozen=True, slots=True)
class HeadroomSample:
    """One reading of one resource's headroom.

    Attributes:
        resource: the resource's name (``kv_cache``, ``seqs``, ...).
        value: the headroom fraction in [0, 1] (1 = all free).
        t: the sample's own time, seconds on the guard's clock (the scrape's, less a payload's age).
    """

    resource: str
    value: float
    t: float


@dataclass(frozen=True, slots=True)
class ResourceLimit:
    """One resource's limits, as headroom fractions.

    Attributes:
        name: the resource's name, as its samples carry it.
        h_min: the redline: fire below it (or when the projection falls below it).
        margin: hysteresis: clear only at or above ``h_min + margin``.
        hard_floor: below it preemption or eviction may act (0: never).
    """

    name: str
    h_min: float
    margin: float = 0.05
    hard_floor: float = 0.0

    def __post_init__(self) -> None:
        where = f"headroom.resources.{self.name}"
        if not self.name:
            raise SpecError("a resource needs a name", field="headroom.resources", value=self.name)
        _fraction(self.h_min, f"{where}.h_min", high=1.0, open_low=True)
        _fraction(self.margin, f"{where}.margin", high=1.0 - self.h_min)
        _fraction(self.hard_floor, f"{where}.hard_floor", high=self.h_min)


@dataclass(frozen=True, slots=True)
class RedlineConfig:
    """The redline's parameters (the runbook's static H_min and α).

    Attributes:
        resources: each resource's limits (names unique).
        alpha: EWMA weight of each fresh sample, in (0, 1].
        horizon: seconds ahead the trend is projected (0: the level alone decides).
        dwell: fresh samples a firing resource stays firing before it may clear (≥ 1).
    """

    resources: tuple[ResourceLimit, ...]
    alpha: float = 0.3
    horizon: float = 0.0
    dwell: int = 1

    def __post_init__(self) -> None:
        names = [r.name for r in self.resources]
        if not names:
            raise SpecError("at least one resource is needed", field="headroom.resources", value=())
        if len(set(names)) != len(names):
            raise SpecError(f"resource names repeat: {names}", field="headroom.resources", value=names)
        _fraction(self.alpha, "headroom.alpha", high=1.0, open_low=True)
        if not (isinstance(self.horizon, int | float) and 0.0 <= self.horizon < math.inf):
            raise SpecError(f"must be a finite number ≥ 0, got {self.horizon!r}", field="headroom.horizon")
        if isinstance(self.dwell, bool) or not isinstance(self.dwell, int) or self.dwell < 1:
            raise SpecError(f"must be a whole number ≥ 1, got {self.dwell!r}", field="headroom.dwell")


def _fraction(value: object, field: str, *, high: float, open_low: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value <= high
    ok = ok and (value > 0.0 if open_low else value >= 0.0)  # type: ignore[operator]
    if not ok:
        low = "(0" if open_low else "[0"
        raise SpecError(f"must be a number in {low}, {high:g}], got {value!r}", field=field, value=value)


@dataclass(frozen=True, slots=True)
class RedlineReading:
    """What one sample did to the redline.

    Attributes:
        fresh: the sample was newer than the last of its resource (else nothing changed).
        firing: the redline fires after this sample.
        toggled: ``firing`` changed on this sample.
        resource: the deciding resource (module doc).
        smoothed: the deciding resource's Ĥ.
        projected: the deciding resource's Ĥ + horizon·dĤ/dt.
        sample_time: this sample's own timestamp.
        hard: the hard floor crossed, if it is (`Redline.hard_floor_crossed`).
    """

    fresh: bool
    firing: bool
    toggled: bool
    resource: str
    smoothed: float
    projected: float
    sample_time: float
    hard: HardFloorCrossing | None = None


@dataclass(frozen=True, slots=True)
class HardFloorCrossing:
    """A resource's smoothed headroom is below its hard floor: preemption or eviction may act.

    Attributes:
        resource: the resource, the lowest below its floor when several are.
        smoothed: its Ĥ.
        floor: its ``hard_floor``.
        sample_time: the fresh sample that put it there.
    """

    resource: str
    smoothed: float
    floor: float
    sample_time: float


@dataclass(frozen=True, slots=True)
class HeadroomView:
    """The dominant resource's headroom now (what a router compares across engines).

    Attributes:
        resource: the resource with the smallest slack.
        smoothed: its Ĥ.
        projected: its Ĥ + horizon·dĤ/dt.
        slack: ``min(smoothed, projected) − h_min`` (negative: below its redline).
        sample_time: its last fresh sample's timestamp.
    """

    resource: str
    smoothed: float
    projected: float
    slack: float
    sample_time: float


class _Track:
    """One resource's EWMA, trend and hysteresis state."""

    __slots__ = ("count", "fired_at", "firing", "limit", "slope", "smoothed", "t")

    def __init__(self, limit: ResourceLimit) -> None:
        self.limit = limit
        self.smoothed = math.nan  # no sample yet
        self.slope = 0.0
        self.t = -math.inf
        self.count = 0  # fresh samples seen
        self.firing = False
        self.fired_at = 0  # ``count`` when it last began firing

    def projected(self, horizon: float) -> float:
        return self.smoothed + horizon * self.slope

    def slack(self, horizon: float) -> float:
        return min(self.smoothed, self.projected(horizon)) - self.limit.h_min


class Redline:
    """The multi-resource physical redline (see module doc).

    Args:
        config: the resources' limits, α, the projection horizon and the dwell.
    """

    __slots__ = ("_alpha", "_firing", "_horizon", "_tracks", "config", "toggles")

    def __init__(self, config: RedlineConfig) -> None:
        self.config = config
        self._alpha = config.alpha
        self._horizon = config.horizon
        self._tracks = {r.name: _Track(r) for r in config.resources}
        self._firing = False
        #: how many times the redline has changed state
        self.toggles = 0

    @property
    def firing(self) -> bool:
        """True while some resource fires: surplus work is demoted."""
        return self._firing

    def observe(self, sample: HeadroomSample) -> RedlineReading:
        """Take one sample; a stale or duplicate one changes nothing (``fresh`` is False).

        Raises:
            TelemetryFormatError: an unknown resource, a value outside [0, 1] or not a number,
                or a time that is not a finite number (nothing changed).
        """
        track = self._checked(sample)
        if not sample.t > track.t:
            return self._reading(fresh=False, toggled=False, sample=sample)
        alpha = self._alpha
        if track.count == 0:
            smoothed, slope = sample.value, 0.0
        else:
            smoothed = alpha * sample.value + (1.0 - alpha) * track.smoothed
            slope = (smoothed - track.smoothed) / (sample.t - track.t)
        track.smoothed, track.slope, track.t = smoothed, slope, sample.t
        track.count += 1
        self._hysteresis(track)
        was = self._firing
        self._firing = any(tr.firing for tr in self._tracks.values())
        toggled = self._firing != was
        self.toggles += toggled
        return self._reading(fresh=True, toggled=toggled, sample=sample)

    def hard_floor_crossed(self) -> HardFloorCrossing | None:
        """The resource below its hard floor (the lowest relative to it), or ``None``.

        The pure signal bare preemption and emergency eviction act on: it reads the smoothed
        headroom only, so a single glitching sample moves it by at most α.
        """
        below = [
            tr
            for tr in self._tracks.values()
            if tr.count and tr.limit.hard_floor > 0.0 and tr.smoothed < tr.limit.hard_floor
        ]
        if not below:
            return None
        tr = min(below, key=lambda x: (x.smoothed - x.limit.hard_floor, x.limit.name))
        return HardFloorCrossing(tr.limit.name, tr.smoothed, tr.limit.hard_floor, tr.t)

    def view(self) -> HeadroomView | None:
        """The dominant resource's smoothed and projected headroom (``None`` before any sample)."""
        seen = [tr for tr in self._tracks.values() if tr.count]
        if not seen:
            return None
        tr = self._dominant(seen)
        h = self._horizon
        return HeadroomView(tr.limit.name, tr.smoothed, tr.projected(h), tr.slack(h), tr.t)

    def stale(self, now: float, max_age: float) -> tuple[str, ...]:
        """Resources whose last fresh sample is older than ``max_age`` at ``now`` (or never came)."""
        return tuple(name for name, tr in self._tracks.items() if not now - tr.t <= max_age)

    def last_sample_time(self, resource: str) -> float:
        """The timestamp of ``resource``'s last fresh sample (-inf before any)."""
        return self._tracks[resource].t

    # -- internals -------------------------------------------------------------------------
    def _checked(self, sample: HeadroomSample) -> _Track:
        track = self._tracks.get(sample.resource)
        if track is None:
            known = sorted(self._tracks)
            raise TelemetryFormatError(
                f"unknown resource {sample.resource!r} (known: {known})", source="<sample>", field="resource"
            )
        v, t = sample.value, sample.t
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
            raise TelemetryFormatError(
                f"must be a fraction in [0, 1], got {v!r}", source="<sample>", field="value"
            )
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise TelemetryFormatError(f"must be a finite time, got {t!r}", source="<sample>", field="t")
        return track

    def _hysteresis(self, track: _Track) -> None:
        limit, h = track.limit, self._horizon
        low = min(track.smoothed, track.projected(h))
        if not track.firing:
            if low < limit.h_min:
                track.firing, track.fired_at = True, track.count
        elif low >= limit.h_min + limit.margin and track.count - track.fired_at >= self.config.dwell:
            track.firing = False

    def _dominant(self, tracks: Iterable[_Track]) -> _Track:
        h = self._horizon
        return min(tracks, key=lambda tr: (tr.slack(h), tr.limit.name))

    def _reading(self, *, fresh: bool, toggled: bool, sample: HeadroomSample) -> RedlineReading:
        seen = [tr for tr in self._tracks.values() if tr.count]
        if not seen:  # a first sample is always fresh, so this is unreachable after a fresh one
            return RedlineReading(fresh, False, False, sample.resource, math.nan, math.nan, sample.t)
        firing = [tr for tr in seen if tr.firing]
        tr = self._dominant(firing or seen)
        h = self._horizon
        hard = self.hard_floor_crossed()
        return RedlineReading(
            fresh, self._firing, toggled, tr.limit.name, tr.smoothed, tr.projected(h), sample.t, hard
        )


def redline_config(spec: HeadroomSpec) -> RedlineConfig:
    """The redline a contract's ``headroom:`` block states (resources in the block's order).

    ``staleness`` is not the redline's: it bounds how old a cited sample may be (property RL).
    """
    limits = tuple(
        ResourceLimit(name, h_min=r.h_min, margin=r.margin, hard_floor=r.hard_floor)
        for name, r in spec.resources.items()
    )
    return RedlineConfig(limits, alpha=spec.alpha, horizon=spec.horizon, dwell=spec.dwell)
