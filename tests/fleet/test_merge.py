"""Merging replica traces: time order, stable ties, errors pinned to their file and line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rvguard.errors import TraceFormatError, TraceOrderError
from rvguard.events import Arrive, Complete
from rvguard.fleet.merge import merge_traces


def _src(*times: float, prefix: str = "a") -> list[tuple[int, Arrive]]:
    return [(i + 1, Arrive(t, f"{prefix}/{i}", "gold")) for i, t in enumerate(times)]


def test_merge_is_by_time_with_ties_in_source_order() -> None:
    out = list(merge_traces([("A", _src(0.0, 1.0, 1.0, prefix="a")), ("B", _src(0.5, 1.0, prefix="b"))]))
    assert [(p, line, e.rid) for p, line, e in out] == [
        ("A", 1, "a/0"),
        ("B", 1, "b/0"),
        ("A", 2, "a/1"),
        ("A", 3, "a/2"),
        ("B", 2, "b/1"),
    ]


def test_the_merge_is_lazy() -> None:
    def endless(prefix: str):
        i = 0
        while True:
            i += 1
            yield i, Complete(float(i), f"{prefix}{i}")

    merged = merge_traces([("A", endless("a")), ("B", endless("b"))])
    first = [next(merged)[2].rid for _ in range(4)]
    assert first == ["a1", "b1", "a2", "b2"]


def test_a_bad_record_passes_through_pinned_to_its_file() -> None:
    bad = TraceFormatError("expected a number", field="t")
    src = [(1, Arrive(0.0, "a/0", "gold")), (2, bad), (3, Arrive(2.0, "a/1", "gold"))]
    out = list(merge_traces([("A.jsonl", src), ("B.jsonl", _src(1.0, prefix="b"))]))
    err = out[1][2]
    assert isinstance(err, TraceFormatError)
    assert (err.path, err.line, err.field) == ("A.jsonl", 2, "t")
    assert [x[2].rid for x in out if not isinstance(x[2], TraceFormatError)] == ["a/0", "b/0", "a/1"]


def test_disorder_within_one_trace_is_an_error_at_its_line() -> None:
    out = list(merge_traces([("A", _src(0.0, 2.0, 1.0)), ("B", _src(1.5, prefix="b"))]))
    errors = [x for x in out if isinstance(x[2], TraceOrderError)]
    assert len(errors) == 1
    path, line, err = errors[0]
    assert (path, line, err.path, err.line, err.field) == ("A", 3, "A", 3, "t")
    assert [x[2].t for x in out if x is not errors[0]] == [0.0, 1.5, 2.0]


@given(st.lists(st.lists(st.floats(0, 100), max_size=12).map(sorted), max_size=5))
def test_merge_is_a_stable_sort_of_the_sources(times: list[list[float]]) -> None:
    sources = [(f"T{i}", _src(*ts, prefix=f"s{i}")) for i, ts in enumerate(times)]
    out = list(merge_traces(sources))
    expected = sorted(
        ((e.t, i, line, e.rid) for i, (_, recs) in enumerate(sources) for line, e in recs),
    )
    assert [x[2].rid for x in out] == [rid for *_, rid in expected]
