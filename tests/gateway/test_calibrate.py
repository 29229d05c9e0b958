"""Calibration: percentiles, the line fit, a sound envelope, a run against the fake upstream."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.contract import contract_from_mapping
from rvguard.enforce.dispatchers import DispatchError
from rvguard.errors import SpecError
from rvguard.gateway.calibrate import Calibration, calibrate, fit_line, percentile
from rvguard.gateway.fake import FakeUpstream


def test_percentile_interpolates() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 75) == 1.75
    assert percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_fit_line_recovers_a_line_and_clamps_negative_slopes() -> None:
    line = fit_line([(1, 0.2), (3, 0.6), (5, 1.0)])
    assert line.base == pytest.approx(0.0) and line.per_token == pytest.approx(0.2)
    assert fit_line([(1, 1.0), (2, 0.5)]).per_token == 0.0
    assert fit_line([(4, 2.0)]).at(100) == 2.0


def test_envelope_is_below_every_sample_and_above_every_batch_max() -> None:
    cal = Calibration(
        "u", "m", 2, 64, samples={1: {1: [0.12, 0.1], 10: [0.3, 0.25]}, 2: {1: [0.2, 0.05], 10: [0.5, 0.4]}}
    )
    lo, up = cal.lower(), cal.upper()
    assert all(lo.at(ell) <= x for by in cal.samples.values() for ell, xs in by.items() for x in xs)
    assert up.at(1) >= 0.2 and up.at(10) >= 0.5
    d = cal.to_dict()
    assert d["service"]["s_max"] == pytest.approx(up.at(64), abs=1e-6) and d["extrapolated"] is True
    assert "extrapolated" in cal.to_yaml() and "batch   2" in cal.to_yaml()


SPEC = {"epoch": 0.0, "window": 1.0, "slots": 4, "tenants": {"a": {"floor": 1, "deadline": 9.0}}}
_times = st.floats(min_value=1e-4, max_value=5.0, allow_nan=False)
_cells = st.dictionaries(
    st.integers(1, 512), st.lists(_times, min_size=1, max_size=4), min_size=1, max_size=4
)


@settings(max_examples=300, deadline=None)
@given(one=_cells, full=_cells)
def test_envelope_bounds_hold_exactly_for_any_samples(
    one: dict[int, list[float]], full: dict[int, list[float]]
) -> None:
    """No tolerance: L ≤ every sample and U ≥ every batch-C maximum, in floats, with L ≥ 0."""
    cal = Calibration("u", "m", 4, 64, samples={1: one, 4: full})
    lo, up = cal.lower(), cal.upper()
    assert lo.base >= 0.0 and lo.per_token >= 0.0
    assert all(lo.at(ell) <= x for by in cal.samples.values() for ell, xs in by.items() for x in xs)
    assert all(up.at(ell) >= max(xs) for ell, xs in full.items())
    # The suggestion as written (rounded to µs) loads as a contract and still bounds the samples.
    service = yaml.safe_load(cal.to_yaml())["service"]
    c = contract_from_mapping({**SPEC, "output_cap": 64, "service": service})
    assert c.service.upper is not None
    assert all(c.lower_bound(ell) <= x for by in cal.samples.values() for ell, xs in by.items() for x in xs)
    assert all(c.service.upper.at(ell) >= max(xs) for ell, xs in full.items())


async def test_calibrate_against_the_fake_upstream() -> None:
    async with FakeUpstream(slots=2, token_delay=0.002) as up:
        cal = await calibrate(up.url, slots=2, lengths=(2, 8), reps=2, output_cap=8)
        sent = up.bodies
    assert cal.model == "fake" and sorted(cal.samples) == [1, 2]
    assert all(b["ignore_eos"] and b["min_tokens"] == b["max_tokens"] for b in sent)
    assert len(sent) == 2 * (1 + 2 * 1) + 2 * (1 + 2 * 2)  # warm-up + reps × batch, per (batch, ℓ)
    assert cal.upper().at(8) >= 8 * 0.002


@pytest.mark.parametrize(("kw"), [{"slots": 0}, {"lengths": ()}, {"lengths": (0,)}, {"reps": 0}])
async def test_calibrate_rejects_bad_arguments(kw: dict[str, object]) -> None:
    with pytest.raises(SpecError):
        await calibrate("http://127.0.0.1:9", **kw)  # type: ignore[arg-type]


async def test_calibrate_unreachable_upstream() -> None:
    async with FakeUpstream() as up:
        url = up.url
    with pytest.raises(DispatchError):
        await calibrate(url, reps=1, lengths=(1,))
