"""The fold over partition summaries gives the single-process check's verdicts and metrics, exactly.

The oracle is the online `Monitor` on the whole trace (what `rvguard check` runs); it
never sees the partitions. Equality is exact: witnesses, details, contexts, and every
metric, the utilisation's float sum included.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.errors import TraceError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event
from rvguard.monitors import Monitor
from rvguard.monitors.fold import Fold, _Seen
from rvguard.monitors.partition import summarise

from .strategies import small_contract, wellformed_traces, within_floor

PROPS = ("AF", "SF", "DR", "WF", "ND", "RB", "CAP", "PR")
JUDGED = ("AF", "SF", "DR", "ND", "RB", "CAP", "PR")
CONTRACTS = [
    small_contract("count"),
    small_contract("tokens"),
    small_contract("count", epoch=0.3),
    small_contract("tokens", epoch=0.7),
    small_contract("count").model_copy(update={"reserve": 1}),  # RB: one surplus request in flight
]


def _fold(events: list[Event], cuts: list[int], contract: Contract) -> Fold:
    edges = [0, *sorted(cuts), len(events)]
    fold = Fold(contract, JUDGED)
    for i in range(len(edges) - 1):
        part = ColumnarTrace.from_events(events[edges[i] : edges[i + 1]])
        if not fold.add(summarise(part, contract, JUDGED, index=i, path=f"p{i}")):
            break
    return fold


def _reference(events: list[Event], contract: Contract) -> Monitor | None:
    """The online monitor on the whole trace; None when strict `rvguard check` refuses the trace."""
    monitor = Monitor(contract, PROPS, retain_finished=None)
    for ev in events:
        try:
            found = monitor.feed(ev)
        except TraceError:
            return None
        if any(v.property == "WF" for v in found):
            return None
    return monitor


def _assert_same(fold: Fold, monitor: Monitor) -> None:
    violations, metrics = fold.result()
    assert [v.to_dict() for v in violations] == [v.to_dict() for v in monitor.violations()]
    assert violations == monitor.violations()
    assert metrics.to_dict() == monitor.summary().to_dict()  # utilisation too: the same float


def _unprovable(monitor: Monitor) -> set[str]:
    """The shared-count properties the monitor found violated (the fold proves them, or gives up)."""
    out = set()
    for v in monitor.violations():
        if v.property in ("RB", "CAP"):
            out.add(v.property)
        if v.property == "AF" and "floor_admitted" in v.context:
            out.add("AF's upper side")
    return out


@settings(max_examples=400, deadline=None)
@given(st.data(), wellformed_traces(max_steps=60), st.sampled_from(range(len(CONTRACTS))))
def test_the_fold_is_the_single_process_check(data: st.DataObject, events: list[Event], which: int) -> None:
    """Cuts at random rows: inside windows, across open requests, empty partitions."""
    contract = CONTRACTS[which]
    if data.draw(st.booleans()):  # a trace that keeps the shared counts (else mostly given up on)
        contract = contract.model_copy(update={"slots": 64})
        events = within_floor(events, contract)
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=10))
    monitor = _reference(events, contract)
    assert monitor is not None
    fold = _fold(events, cuts, contract)
    violated = _unprovable(monitor)
    if violated:
        assert any(f"{p} is violated" in fold.unproven for p in violated)  # the single process names them
        return
    assert not fold.unproven
    _assert_same(fold, monitor)


def _mutate(events: list[Event], data: st.DataObject) -> list[Event]:
    """A trace with one random defect: a row moved, repeated, dropped, retimed, or renamed."""
    out = list(events)
    i = data.draw(st.integers(0, len(out) - 1))
    j = data.draw(st.integers(0, len(out) - 1))
    how = data.draw(st.sampled_from(["move", "repeat", "drop", "retime", "rename", "reuse"]))
    ev = out[i]
    if how == "move":
        out.insert(j, out.pop(i))
    elif how == "repeat":
        out.insert(max(i, j), ev)
    elif how == "drop":
        del out[i]
    elif how == "retime":
        out[i] = dataclasses.replace(ev, t=out[j].t)
    elif how == "rename":
        out[i] = dataclasses.replace(ev, rid=out[j].rid)
    else:  # an arrive again, at the end, for a rid seen before
        out.append(Arrive(out[-1].t, ev.rid, "a"))
    return out


@settings(max_examples=400, deadline=None)
@given(st.data(), wellformed_traces(max_steps=30), st.sampled_from(range(len(CONTRACTS))))
def test_a_trace_the_check_refuses_is_never_folded(
    data: st.DataObject, events: list[Event], which: int
) -> None:
    """Defects anywhere, across partitions too: the fold says unproven, or it is right."""
    contract = CONTRACTS[which]
    events = _mutate(events, data)
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=6))
    monitor = _reference(events, contract)
    fold = _fold(events, cuts, contract)
    if monitor is None or _unprovable(monitor):
        assert fold.unproven
    else:
        assert not fold.unproven
        _assert_same(fold, monitor)


def test_a_rid_again_in_a_later_partition_is_caught() -> None:
    contract = CONTRACTS[0]
    first = [Arrive(0.0, "x", "a"), Admit(0.0, "x", Basis.FLOOR), Dispatch(0.1, "x"), Complete(0.2, "x")]
    fold = _fold([*first, Arrive(5.0, "x", "a")], [4], contract)
    assert "arrive a second time" in fold.unproven


def test_an_event_after_the_end_in_a_later_partition_is_caught() -> None:
    contract = CONTRACTS[0]
    first = [Arrive(0.0, "x", "a"), Admit(0.0, "x", Basis.FLOOR), Dispatch(0.1, "x"), Complete(0.2, "x")]
    fold = _fold([*first, Complete(5.0, "x")], [4], contract)
    assert "not an open request" in fold.unproven
    with pytest.raises(ValueError, match="no result"):
        fold.result()


def test_summaries_go_in_order() -> None:
    fold = Fold(CONTRACTS[0], JUDGED)
    part = summarise(
        ColumnarTrace.from_events([Arrive(0.0, "x", "a")]), CONTRACTS[0], JUDGED, index=1, path="p"
    )
    with pytest.raises(ValueError, match="trace order"):
        fold.add(part)


def test_the_busy_sum_is_added_left_to_right() -> None:
    """`numpy.add.accumulate` is a sequential sum (not pairwise, as `sum` is): the monitor's."""
    rng = np.random.default_rng(7)
    terms = rng.random(100_001) * 10.0 ** rng.integers(-6, 6, 100_001)
    total = 0.0
    for x in terms.tolist():
        total += x
    assert float(np.add.accumulate(terms)[-1]) == total
    assert float(np.sum(terms)) != total  # the pairwise sum differs: order matters


def test_seen_rids_catch_a_repeat_in_any_run() -> None:
    seen = _Seen()
    for k in range(40):
        assert seen.add(np.arange(k * 10, k * 10 + 10, dtype=np.uint64))
    assert len(seen.runs) <= 8  # merged by size: logarithmic in the number of partitions
    assert not seen.add(np.array([5, 1000], dtype=np.uint64))
    assert not seen.add(np.array([1000, 1000], dtype=np.uint64))
    assert seen.add(np.array([1000], dtype=np.uint64))


def test_empty_partitions_only() -> None:
    """No event at all: the monitor's empty report (no first or last time, no utilisation)."""
    monitor = _reference([], CONTRACTS[0])
    assert monitor is not None
    fold = _fold([], [0, 0, 0], CONTRACTS[0])
    _assert_same(fold, monitor)
