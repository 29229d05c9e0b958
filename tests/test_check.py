"""`rvguard check`'s driver: a refused line is located from the violation's data, not its prose."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pytest

from rvguard.check import _protocol_error, check_trace
from rvguard.contract import Contract
from rvguard.errors import TraceError, TraceFormatError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Reject
from rvguard.verdict import Violation


@pytest.mark.parametrize(
    ("location", "refused", "field"),
    [
        ("new", Admit(1.0, "x"), "rid"),  # the request never arrived
        ("arrived", Arrive(1.0, "x", "assured"), "rid"),  # it arrives twice
        ("done", Complete(1.0, "x"), "kind"),  # an event after its terminal one
        ("admitted", Complete(1.0, "x"), "kind"),
    ],
)
def test_the_field_at_fault_comes_from_the_stage_and_the_kind(
    location: str, refused: Event, field: str
) -> None:
    """The detail says nothing the old prose search looked for ("duplicate", "never arrived")."""
    v = Violation("WF", "x", 1.0, (refused,), "a sentence worded any way", {"location": location})
    err = _protocol_error(v, "t.jsonl", 7)
    assert (err.field, err.line, err.path) == (field, 7, "t.jsonl")


def _feed(
    records: list[tuple[int, Event | TraceError]],
) -> Callable[[str], Iterator[tuple[int, Event | TraceError]]]:
    return lambda _path: iter(records)


def _numbered(events: Iterable[Event | TraceError]) -> list[tuple[int, Event | TraceError]]:
    return list(enumerate(events, start=1))


def _in_flight(rid: str = "a") -> list[Event]:
    """An entitled request admitted and dispatched; its deadline is 1.82 s after t = 0."""
    return [Arrive(0.0, rid, "assured"), Admit(0.0, rid, Basis.FLOOR), Dispatch(0.1, rid)]


@pytest.mark.parametrize(
    "refused",
    [
        Complete(5.0, "zz"),  # WF: the request never arrived
        Arrive(5.0, "b", "nobody"),  # a tenant the contract lacks
        Arrive(5.0, "a", "assured"),  # WF: a second arrive
        TraceFormatError("must be a number", field="t"),  # a bad field
    ],
)
def test_issue_10_a_refused_line_moves_no_clock(marquee: Contract, refused: Event | TraceError) -> None:
    """Item 9: the refused line at t = 5.0 fired a's SF deadline (1.82) under --lenient."""
    report = check_trace("t.jsonl", marquee, lenient=True, records=_feed(_numbered([*_in_flight(), refused])))
    assert [b.line for b in report.bad_lines] == [4]
    assert not [v for v in report.violations if v.property == "SF"]
    assert report.metrics.open_requests == 1
    later = [*_in_flight(), refused, Complete(1.0, "a")]  # before the refused line's time: still in order
    report = check_trace("t.jsonl", marquee, lenient=True, records=_feed(_numbered(later)))
    assert [b.line for b in report.bad_lines] == [4]
    assert not [v for v in report.violations if v.property != "WF"]


def _many(n: int) -> Iterator[Event]:
    for i in range(n):
        yield Arrive(float(i), f"r{i}", "opportunistic")
        yield Reject(float(i), f"r{i}", "learner")


def test_issue_10_check_judges_wf_over_the_whole_file(marquee: Contract) -> None:
    """Item 8: a rid reused 100,001 finished requests later was accepted (the monitor forgot it),
    and a later event for a forgotten rid read 'never arrived'."""
    n = 100_001
    head = [Arrive(0.0, "x", "opportunistic"), Reject(0.0, "x", "learner")]
    tail = [Arrive(float(n), "x", "opportunistic"), Dispatch(float(n), "r0")]
    records = _numbered([*head, *_many(n), *tail])
    report = check_trace("t.jsonl", marquee, lenient=True, records=_feed(records))
    bad = [(b.line, b.field, b.reason) for b in report.bad_lines]
    assert bad == [
        (2 * n + 3, "rid", "duplicate arrive for rid 'x'"),
        (2 * n + 4, "kind", "dispatch not allowed: the request already had its terminal event"),
    ]
