"""The physical redline: EWMA, the trend from real timestamps, staleness, hysteresis, resources.

The differential tests hold `Redline` against `_reference`, a brute-force re-computation from the
whole sample history written here (it shares no code with the module).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.enforce.redline import HeadroomSample, Redline, RedlineConfig, ResourceLimit
from rvguard.errors import SpecError, TelemetryFormatError

KV = ResourceLimit("kv_cache", h_min=0.2, margin=0.1, hard_floor=0.05)
SEQS = ResourceLimit("seqs", h_min=0.1, margin=0.05)
JITTER = (14.8, 15.2, 14.9, 15.3, 14.7, 15.1, 15.0, 14.6, 15.4, 15.0)


def _times(steps: tuple[float, ...]) -> list[float]:
    out, t = [], 0.0
    for dt in steps:
        t += dt
        out.append(t)
    return out


def _true_slope_holds(projected: list[float], values: list[float], horizon: float, slope: float) -> bool:
    """Each projection after the first equals the sample plus horizon·(the true slope)."""
    return all(
        math.isclose(p, v + horizon * slope, abs_tol=1e-9)
        for p, v in zip(projected[1:], values[1:], strict=True)
    )


def test_the_trend_comes_from_the_samples_own_timestamps_not_a_nominal_period() -> None:
    slope, horizon = -0.002, 60.0  # a linear fall of 0.2 % a second, projected a minute ahead
    times = _times(JITTER)
    values = [0.9 + slope * t for t in times]
    redline = Redline(RedlineConfig((KV,), alpha=1.0, horizon=horizon))
    projected = [
        redline.observe(HeadroomSample("kv_cache", v, t)).projected
        for v, t in zip(values, times, strict=True)
    ]
    assert _true_slope_holds(projected, values, horizon, slope)
    # the same check refuses a nominal-period implementation (dĤ/dt over an assumed 15 s)
    nominal = [values[0]] + [v + horizon * (v - u) / 15.0 for u, v in itertools.pairwise(values)]
    assert not _true_slope_holds(nominal, values, horizon, slope)


def test_jitter_decides_the_projected_trigger_as_the_real_slope_says() -> None:
    # H falls 0.003/s; horizon 10 s: the projection is H - 0.03. H_min = 0.5 is crossed by the
    # projection once H < 0.53. A nominal 15 s period underestimates the 15.2 s gap's slope
    # only slightly, but at the 14.8 s gap it overestimates it: fire/no-fire must follow the truth.
    limit = ResourceLimit("kv_cache", h_min=0.5, margin=0.05)
    redline = Redline(RedlineConfig((limit,), alpha=1.0, horizon=10.0))
    times = _times((14.8, 15.2, 14.8, 15.2, 14.8, 15.2))
    fired_at = None
    for t in times:
        h = 0.62 - 0.003 * t
        r = redline.observe(HeadroomSample("kv_cache", h, t))
        true_projection = h - 0.003 * 10.0
        assert r.projected == pytest.approx(true_projection, abs=1e-12) or t == times[0]
        if r.firing and fired_at is None:
            fired_at = t
    first_true = next(t for t in times[1:] if 0.62 - 0.003 * t - 0.03 < 0.5)
    assert fired_at == first_true


def test_stale_and_duplicate_samples_change_nothing() -> None:
    redline = Redline(RedlineConfig((KV,), alpha=0.5, horizon=5.0))
    redline.observe(HeadroomSample("kv_cache", 0.8, 10.0))
    redline.observe(HeadroomSample("kv_cache", 0.6, 20.0))
    before = (redline.view(), redline.firing, redline.toggles)
    for t in (20.0, 19.0, 5.0):  # a duplicate scrape, then two late ones
        r = redline.observe(HeadroomSample("kv_cache", 0.0, t))
        assert not r.fresh and not r.toggled
    assert (redline.view(), redline.firing, redline.toggles) == before
    assert redline.last_sample_time("kv_cache") == 20.0


def test_ewma_fires_below_h_min_and_restores_only_above_the_margin() -> None:
    redline = Redline(RedlineConfig((KV,), alpha=0.5))
    # Ĥ: 0.5, 0.3, 0.2 (not < 0.2), then 0.15 fires; 0.2, 0.25 (< 0.3 stays); 0.325 clears
    seq = [(0.5, False), (0.1, False), (0.1, False), (0.1, True), (0.25, True), (0.3, True), (0.4, False)]
    for i, (h, firing) in enumerate(seq):
        r = redline.observe(HeadroomSample("kv_cache", h, float(i)))
        assert r.firing is firing, (i, r)
    assert redline.toggles == 2


def test_dwell_holds_a_firing_resource_for_that_many_fresh_samples() -> None:
    redline = Redline(RedlineConfig((KV,), alpha=1.0, dwell=3))
    states = [
        redline.observe(HeadroomSample("kv_cache", h, float(i))).firing
        for i, h in enumerate([0.1, 0.9, 0.9, 0.9])
    ]
    assert states == [True, True, True, False]


def test_the_dominant_resource_decides_and_is_named() -> None:
    redline = Redline(RedlineConfig((KV, SEQS), alpha=1.0))
    assert redline.observe(HeadroomSample("kv_cache", 0.5, 1.0)).resource == "kv_cache"
    r = redline.observe(HeadroomSample("seqs", 0.12, 1.0))  # slack 0.02 < kv's 0.3
    assert (r.firing, r.resource) == (False, "seqs")
    r = redline.observe(HeadroomSample("kv_cache", 0.15, 2.0))  # kv fires (slack -0.05)
    assert (r.firing, r.resource, r.smoothed) == (True, "kv_cache", 0.15)
    r = redline.observe(HeadroomSample("seqs", 0.05, 2.0))  # both fire; seqs slack -0.05 ties, name
    assert (r.firing, r.resource) == (True, "kv_cache")
    r = redline.observe(HeadroomSample("seqs", 0.0, 3.0))  # seqs slack -0.1: now it decides
    assert (r.firing, r.resource) == (True, "seqs")
    r = redline.observe(HeadroomSample("kv_cache", 0.9, 4.0))  # kv clears; seqs still fires
    assert (r.firing, r.resource) == (True, "seqs")
    view = redline.view()
    assert view is not None and (view.resource, view.slack) == ("seqs", pytest.approx(-0.1))


def test_hard_floor_is_reported_on_the_smoothed_headroom() -> None:
    redline = Redline(RedlineConfig((KV, SEQS), alpha=0.5))
    assert redline.hard_floor_crossed() is None
    redline.observe(HeadroomSample("kv_cache", 0.06, 0.0))
    assert redline.hard_floor_crossed() is None
    r = redline.observe(HeadroomSample("kv_cache", 0.0, 1.0))  # Ĥ = 0.03 < 0.05
    assert r.hard is not None and (r.hard.resource, r.hard.smoothed, r.hard.sample_time) == (
        "kv_cache",
        0.03,
        1.0,
    )
    redline.observe(HeadroomSample("seqs", 0.0, 2.0))  # seqs has no hard floor (0): never reported
    crossing = redline.hard_floor_crossed()
    assert crossing is not None and crossing.resource == "kv_cache"


def test_stale_resources_are_named() -> None:
    redline = Redline(RedlineConfig((KV, SEQS)))
    redline.observe(HeadroomSample("kv_cache", 0.5, 10.0))
    assert redline.stale(20.0, 15.0) == ("seqs",)
    assert redline.stale(30.0, 15.0) == ("kv_cache", "seqs")


@pytest.mark.parametrize(
    ("sample", "field"),
    [
        (HeadroomSample("gpu", 0.5, 1.0), "resource"),
        (HeadroomSample("kv_cache", 1.5, 1.0), "value"),
        (HeadroomSample("kv_cache", math.nan, 1.0), "value"),
        (HeadroomSample("kv_cache", -0.1, 1.0), "value"),
        (HeadroomSample("kv_cache", 0.5, math.inf), "t"),
        (HeadroomSample("kv_cache", 0.5, math.nan), "t"),
    ],
)
def test_a_bad_sample_is_refused_and_changes_nothing(sample: HeadroomSample, field: str) -> None:
    redline = Redline(RedlineConfig((KV,)))
    redline.observe(HeadroomSample("kv_cache", 0.5, 0.0))
    before = redline.view()
    with pytest.raises(TelemetryFormatError) as info:
        redline.observe(sample)
    assert info.value.field == field
    assert redline.view() == before


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: ResourceLimit("kv", h_min=0.0), "headroom.resources.kv.h_min"),
        (lambda: ResourceLimit("kv", h_min=1.5), "headroom.resources.kv.h_min"),
        (lambda: ResourceLimit("kv", h_min=0.9, margin=0.2), "headroom.resources.kv.margin"),
        (lambda: ResourceLimit("kv", h_min=0.2, hard_floor=0.3), "headroom.resources.kv.hard_floor"),
        (lambda: ResourceLimit("", h_min=0.2), "headroom.resources"),
        (lambda: RedlineConfig(()), "headroom.resources"),
        (lambda: RedlineConfig((KV, KV)), "headroom.resources"),
        (lambda: RedlineConfig((KV,), alpha=0.0), "headroom.alpha"),
        (lambda: RedlineConfig((KV,), alpha=1.2), "headroom.alpha"),
        (lambda: RedlineConfig((KV,), horizon=-1.0), "headroom.horizon"),
        (lambda: RedlineConfig((KV,), horizon=math.inf), "headroom.horizon"),
        (lambda: RedlineConfig((KV,), dwell=0), "headroom.dwell"),
    ],
)
def test_config_is_validated_at_construction(build: object, field: str) -> None:
    with pytest.raises(SpecError) as info:
        build()  # type: ignore[operator]
    assert info.value.field == field


# -- the differential oracle --------------------------------------------------------------------
@dataclass
class _Ref:
    fresh: bool
    firing: bool
    resource: str
    smoothed: float


def _reference(config: RedlineConfig, samples: list[HeadroomSample]) -> list[_Ref]:
    """Recompute, after every sample, the redline from the whole history so far (O(n²))."""
    limits = {r.name: r for r in config.resources}
    out = []
    for i, s in enumerate(samples):
        history = samples[: i + 1]
        fresh = all(p.t < s.t for p in history[:-1] if p.resource == s.resource)
        per = {
            name: _replay(config, limits[name], [p for p in history if p.resource == name]) for name in limits
        }
        seen = {n: v for n, v in per.items() if v is not None}
        firing = {n: v for n, v in seen.items() if v[2]}
        pool = firing or seen
        name = min(pool, key=lambda n: (min(pool[n][0], pool[n][1]) - limits[n].h_min, n))
        out.append(_Ref(fresh, bool(firing), name, pool[name][0]))
    return out


def _replay(
    config: RedlineConfig, limit: ResourceLimit, samples: list[HeadroomSample]
) -> tuple[float, float, bool] | None:
    """One resource's (Ĥ, projection, firing) after its samples, keeping only the fresh ones."""
    fresh: list[HeadroomSample] = []
    for s in samples:
        if not fresh or s.t > fresh[-1].t:
            fresh.append(s)
    if not fresh:
        return None
    smooth = [fresh[0].value]
    for s in fresh[1:]:
        smooth.append(config.alpha * s.value + (1.0 - config.alpha) * smooth[-1])
    firing, since = False, 0
    proj = smooth[0]
    for n in range(len(fresh)):
        slope = 0.0 if n == 0 else (smooth[n] - smooth[n - 1]) / (fresh[n].t - fresh[n - 1].t)
        proj = smooth[n] + config.horizon * slope
        low = min(smooth[n], proj)
        if not firing and low < limit.h_min:
            firing, since = True, n
        elif firing and low >= limit.h_min + limit.margin and n - since >= config.dwell:
            firing = False
    return smooth[-1], proj, firing


_VALUE = st.one_of(
    st.floats(0.0, 1.0),  # noise anywhere
    st.sampled_from([0.0, 1.0, 0.2, 0.3]),  # glitches and values at the limits
)
_STEP = st.one_of(st.just(0.0), st.floats(-5.0, 0.0), st.floats(0.01, 30.0), st.sampled_from([14.8, 15.2]))


@st.composite
def _signals(draw: st.DrawFn) -> tuple[RedlineConfig, list[HeadroomSample]]:
    alpha = draw(st.sampled_from([0.05, 0.2, 0.5, 1.0]))
    horizon = draw(st.sampled_from([0.0, 5.0, 60.0]))
    dwell = draw(st.integers(1, 4))
    config = RedlineConfig((KV, SEQS), alpha=alpha, horizon=horizon, dwell=dwell)
    t, samples = 100.0, []
    for _ in range(draw(st.integers(1, 40))):
        t += draw(_STEP)  # 0: a duplicate; negative: a late (stale) sample; jittered periods
        samples.append(HeadroomSample(draw(st.sampled_from(["kv_cache", "seqs"])), draw(_VALUE), t))
    return config, samples


@given(_signals())
@settings(max_examples=300, deadline=None)
def test_redline_agrees_with_a_brute_force_recomputation(
    case: tuple[RedlineConfig, list[HeadroomSample]],
) -> None:
    config, samples = case
    redline = Redline(config)
    for s, ref in zip(samples, _reference(config, samples), strict=True):
        r = redline.observe(s)
        assert (r.fresh, r.firing, r.resource) == (ref.fresh, ref.firing, ref.resource)
        assert r.smoothed == ref.smoothed


@given(_signals())
@settings(max_examples=300, deadline=None)
def test_toggles_are_bounded_by_the_dwell_and_level_episodes_by_the_margin(
    case: tuple[RedlineConfig, list[HeadroomSample]],
) -> None:
    config, samples = case
    redline = Redline(config)
    fresh = {"kv_cache": 0, "seqs": 0}
    toggled_at: dict[str, list[int]] = {"kv_cache": [], "seqs": []}
    was = {"kv_cache": False, "seqs": False}
    for s in samples:
        r = redline.observe(s)
        fresh[s.resource] += r.fresh
        now = redline._tracks[s.resource].firing  # the per-resource state under test
        if now != was[s.resource]:
            toggled_at[s.resource].append(fresh[s.resource])
        was[s.resource] = now
    limits = {r.name: r for r in config.resources}
    for name, at in toggled_at.items():
        assert len(at) <= 2 * math.ceil(fresh[name] / (config.dwell + 1))
        for start, end in zip(
            at[::2], at[1::2], strict=False
        ):  # each episode: fired at `start`, cleared at `end`
            assert end - start >= config.dwell
            if config.horizon == 0.0:  # level only: Ĥ climbed ≥ margin, ≤ α a sample
                assert (end - start) * config.alpha >= limits[name].margin - 1e-9
    assert redline.toggles <= sum(len(a) for a in toggled_at.values())
