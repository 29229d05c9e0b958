"""Redline triggers the headroom did not confirm: false triggers, what they cost, a suggested α.

The guard traces every fresh headroom sample it fed its redline (``sample``: resource, raw
value, the sample's own time). Replaying those samples through the same pure `Redline` with the
contract's configuration gives back exactly the episodes the guard acted on (it is deterministic
in its samples). An episode — from the sample that made it fire to the one that cleared it — is
*confirmed* when at least ``confirm`` raw samples of its deciding resource, taken from its start
until its end (or ``horizon`` seconds after its start, whichever is later), were below that
resource's ``h_min``: the headroom really went there. Otherwise it was a false trigger: a glitch
the smoothing let through, or a trend that never materialised. Its cost is the requests the
guard demoted during it, and the seconds they were held.

Suggested α: replaying the same samples with smaller α (down the grid from the contract's), the
largest α with no unconfirmed episode that still fires during every confirmed one. The episodes
of the replays are judged by the same rule, so the suggestion is checked on this trace's own
samples (the `redline-alpha` experiment is the same question on a seeded profile).

Pure. Cost: O(samples · grid) redline updates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..enforce.redline import HeadroomSample, Redline, RedlineConfig
from .findings import EXAMPLES, Finding
from .records import Demotion, Sample

__all__ = ["ALPHA_GRID", "Episode", "episodes", "false_triggers"]

ALPHA_GRID = tuple(round(0.05 * i, 2) for i in range(20, 0, -1))


@dataclass(frozen=True, slots=True)
class Episode:
    """One firing of the redline: its deciding resource, start and end (trace time and sample time)."""

    resource: str
    start: float
    end: float
    start_sample: float
    end_sample: float
    confirmed: bool


def _replay(samples: Sequence[Sample], config: RedlineConfig) -> list[tuple[Sample, str, bool]]:
    """(sample, deciding resource, firing after it) for every fresh sample, in order."""
    redline = Redline(config)
    out = []
    for s in samples:
        reading = redline.observe(HeadroomSample(s.resource, s.value, s.sample_time))
        if reading.fresh:
            out.append((s, reading.resource, reading.firing))
    return out


def _confirmed(samples: Sequence[Sample], config: RedlineConfig, ep: Episode, confirm: int) -> bool:
    h_min = {r.name: r.h_min for r in config.resources}[ep.resource]
    until = max(ep.end_sample, ep.start_sample + config.horizon)
    low = sum(
        1
        for s in samples
        if s.resource == ep.resource and ep.start_sample <= s.sample_time <= until and s.value < h_min
    )
    return low >= confirm


def episodes(samples: Sequence[Sample], config: RedlineConfig, *, confirm: int = 2) -> list[Episode]:
    """The redline's firing episodes over the traced samples, each judged confirmed or not."""
    out: list[Episode] = []
    start: tuple[Sample, str] | None = None
    last: Sample | None = None
    for s, resource, firing in _replay(samples, config):
        last = s
        if firing and start is None:
            start = (s, resource)
        elif not firing and start is not None:
            first, res = start
            out.append(Episode(res, first.t, s.t, first.sample_time, s.sample_time, False))
            start = None
    if start is not None and last is not None:  # still firing when the trace ends
        first, res = start
        out.append(Episode(res, first.t, math.inf, first.sample_time, math.inf, False))
    return [replace(ep, confirmed=_confirmed(samples, config, ep, confirm)) for ep in out]


def _overlaps(a: Episode, b: Episode) -> bool:
    return a.start_sample <= b.end_sample and b.start_sample <= a.end_sample


def _suggest_alpha(
    samples: Sequence[Sample], config: RedlineConfig, confirm: int, real: list[Episode]
) -> float | None:
    for alpha in (a for a in ALPHA_GRID if a < config.alpha):
        trial = episodes(samples, replace(config, alpha=alpha), confirm=confirm)
        if any(not ep.confirmed for ep in trial):
            continue
        if all(any(_overlaps(r, ep) for ep in trial) for r in real):
            return alpha
    return None


def false_triggers(
    samples: Sequence[Sample],
    demotions: Sequence[Demotion],
    config: RedlineConfig,
    last: float,
    *,
    confirm: int = 2,
) -> list[Finding]:
    """A finding when some episode was not confirmed by the headroom (module doc)."""
    eps = episodes(samples, config, confirm=confirm)
    false = [ep for ep in eps if not ep.confirmed]
    if not false:
        return []
    demoted = [d for d in demotions if any(ep.start <= d.t <= ep.end for ep in false)]
    held = sum((last if math.isnan(d.restored) else d.restored) - d.t for d in demoted)
    suggested = _suggest_alpha(samples, config, confirm, [ep for ep in eps if ep.confirmed])
    text = (
        f"lower headroom.alpha to {suggested:g}: on this trace's samples it fires on every confirmed "
        f"episode and on no other"
        if suggested is not None
        else "no smaller alpha removes them without missing a confirmed episode: raise dwell or margin, "
        "or check the exporter (see `rvguard experiment redline-alpha`)"
    )
    return [
        Finding(
            parameter="headroom.alpha",
            problem=f"redline triggers the headroom did not confirm (< {confirm} raw samples below h_min)",
            occurrences=len(false),
            affected=len({d.rid for d in demoted}),
            cost={"demotions": len(demoted), "held_seconds": held, "episodes": len(eps)},
            current=config.alpha,
            observed=len(false) / len(eps),
            suggested=suggested,
            suggestion=text,
            examples=tuple(f"{ep.resource}@{ep.start:g}" for ep in false[:EXAMPLES]),
            recalibrate={} if suggested is None else {"headroom.alpha": suggested},
        )
    ]
