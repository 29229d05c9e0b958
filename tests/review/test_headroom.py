"""Review of the redline: triggers the headroom did not confirm, their cost, and a suggested α."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.enforce.redline import RedlineConfig, ResourceLimit
from rvguard.events import Demote, Event, Restore, Sample
from rvguard.review import review_events
from rvguard.review.headroom import episodes
from rvguard.review.records import Sample as Traced

from ._traces import contract, ordered, served

KV = ResourceLimit("kv_cache", h_min=0.2, margin=0.05)


def _samples(values: list[float], start: float = 0.0) -> list[Event]:
    return [Sample(start + 15.0 * i, "kv_cache", v, start + 15.0 * i) for i, v in enumerate(values)]


def test_a_glitch_the_smoothing_let_through_is_a_false_trigger_with_its_cost_and_a_smaller_alpha() -> None:
    config = RedlineConfig((KV,), alpha=0.9)
    glitch = [0.6] * 5 + [0.0] + [0.6] * 5  # one sample at 0: Ĥ = 0.06, fires; the next clears it
    surge = [0.05] * 6 + [0.6] * 4  # a real dip: six samples below h_min
    events = _samples(glitch + surge)
    events += [Demote(75.0, "o1", "kv_cache", 75.0), Restore(90.0, "o1", "kv_cache", 90.0)]
    events += ordered(served("o1", 70.0, 0.1, tenant="opp", wait=20.5))
    events = sorted(events, key=lambda e: e.t)
    report, _ = review_events(events, contract(), redline=config)
    (f,) = [f for f in report.findings if f.parameter == "headroom.alpha"]
    assert (f.occurrences, f.affected) == (1, 1)
    assert f.cost == {"demotions": 1, "held_seconds": 15.0, "episodes": 2}
    assert f.suggested == 0.65 and f.recalibrate == {"headroom.alpha": 0.65}  # 0.6·(1 − α) ≥ 0.2 ⇔ α ≤ 2/3
    again, _ = review_events(events, contract(), redline=RedlineConfig((KV,), alpha=0.65))
    assert not [g for g in again.findings if g.parameter == "headroom.alpha"]


def test_without_a_configuration_the_samples_are_noted_not_judged() -> None:
    report, _ = review_events(_samples([0.6, 0.0, 0.6]), contract())
    assert report.findings == () and "no redline configuration" in report.notes[0]


def test_a_trend_that_never_materialises_is_unconfirmed() -> None:
    config = RedlineConfig((KV,), alpha=1.0, horizon=60.0)
    values = [0.6, 0.45, 0.6, 0.6, 0.6]  # slope −0.01/s: projection 0.45 − 0.6 < 0.2, then it recovers
    (ep,) = episodes([Traced("kv_cache", v, 15.0 * i, 15.0 * i) for i, v in enumerate(values)], config)
    assert not ep.confirmed and ep.start_sample == 15.0


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.1, 0.19, 0.2, 0.3, 0.6, 1.0]), min_size=1, max_size=40))
def test_at_alpha_1_episodes_are_the_raw_runs_below_h_min(values: list[float]) -> None:
    """With α = 1 and no horizon Ĥ is the raw value: an episode starts at a raw value below 0.2 and
    ends at the first one at or above 0.25; confirmed when it holds two samples below 0.2."""
    config = RedlineConfig((KV,), alpha=1.0)
    got = episodes([Traced("kv_cache", v, float(i), float(i)) for i, v in enumerate(values)], config)
    expected: list[tuple[float, bool]] = []
    start, low = None, 0
    for i, v in enumerate(values):
        if start is None and v < 0.2:
            start, low = i, 0
        if start is not None:
            low += v < 0.2
            if v >= 0.25:
                expected.append((float(start), low >= 2))
                start = None
    if start is not None:
        expected.append((float(start), low >= 2))
    assert [(e.start_sample, e.confirmed) for e in got] == expected
    report, _ = review_events(_samples(values), contract(), redline=config)
    for f in report.findings:
        if f.recalibrate:
            fixed = RedlineConfig((KV,), alpha=f.recalibrate["headroom.alpha"])
            again, _ = review_events(_samples(values), contract(), redline=fixed)
            assert not again.findings
