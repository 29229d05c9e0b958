"""The phase sweep: entitlement re-judged at shifted window origins."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.errors import SpecError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Reject
from rvguard.monitors import Monitor
from rvguard.monitors.phase import phase_sweep

from .strategies import small_contract, wellformed_traces


def straddle(marquee: Contract) -> ColumnarTrace:
    """Six served arrivals in [0.5, 1) then six rejected in [1, 1.5): a guard with origin 0.5."""
    events: list[Event] = []
    for i in range(12):
        t = 0.5 + 0.08 * i if i < 6 else 1.0 + 0.08 * (i - 6)
        events.append(Arrive(t, f"r{i}", "assured"))
        if i < 6:
            events += [Admit(t, f"r{i}", Basis.FLOOR), Dispatch(t, f"r{i}"), Complete(t + 0.1, f"r{i}")]
        else:
            events.append(Reject(t, f"r{i}", "excess"))
    events.sort(key=lambda e: e.t)
    return ColumnarTrace.from_events(events)


def test_attainment_depends_on_the_origin(marquee: Contract) -> None:
    sweep = phase_sweep(straddle(marquee), marquee, 2)
    by_phase = {r.phase: r for r in sweep.rows}
    assert by_phase[0.0].attainment == 0.5
    assert by_phase[0.5].attainment == 1.0
    assert (sweep.worst_phase, sweep.worst_attainment) == (0.0, 0.5)


def test_rejections_entitled_only_at_another_phase_are_listed() -> None:
    from rvguard.contract import contract_from_mapping

    c = contract_from_mapping(
        {
            "epoch": 0.5,
            "window": 1.0,
            "slots": 4,
            "service": {"s_max": 0.66},
            "tenants": {"assured": {"floor": 6, "deadline": 1.82}},
        }
    )
    sweep = phase_sweep(straddle(c), c, 2)
    shifted = next(r for r in sweep.rows if r.phase == 0.5)
    assert shifted.newly_entitled_rejections == 6
    assert set(shifted.examples) == {f"r{i}" for i in range(6, 12)}


def test_steps_must_be_positive(marquee: Contract) -> None:
    with pytest.raises(SpecError, match="at least 1"):
        phase_sweep(straddle(marquee), marquee, 0)


@settings(max_examples=150, deadline=None)
@given(wellformed_traces(runbook=True))
def test_a_trace_with_the_runbook_kinds_is_swept_on_its_admissions(events: list[Event]) -> None:
    """Routes, demotions, evictions, relocations and samples change no admission nor outcome: the
    sweep is that of the trace without them (and without a relocated request's second dispatch,
    filtered here by hand), and at φ = 0 it counts what the online monitor counts."""
    c = small_contract()
    seen: set[str] = set()
    plain = []
    for e in events:
        if e.kind.value not in ("arrive", "admit", "reject", "dispatch", "complete", "drop", "fail"):
            continue
        if isinstance(e, Dispatch) and e.rid in seen:
            continue
        if isinstance(e, Dispatch):
            seen.add(e.rid)
        plain.append(e)
    sweep = phase_sweep(ColumnarTrace.from_events(events), c, 3)
    assert sweep == phase_sweep(ColumnarTrace.from_events(plain), c, 3)
    monitor = Monitor(c)
    monitor.feed_all(events)
    summary = monitor.summary()
    if plain:
        first = sweep.rows[0]
        assert (first.entitled, first.attained) == (summary.entitled, summary.entitled_attained)
    else:
        assert sweep.rows == ()
