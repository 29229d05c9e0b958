"""The vectorised Parquet → columns path agrees with the event path, row for row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.errors import TraceError, TraceFormatError
from rvguard.events import Event
from rvguard.io import read_columnar, write_events
from rvguard.io.parquet import iter_parquet
from rvguard.io.parquet_columns import parquet_columnar

NAN = float("nan")
CELLS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "t": (pa.float64(), [0.0, 1.5, 2.0, 1e9, NAN, -1.0, None, float("inf")]),
    "kind": (pa.string(), ["arrive", "arrive", "admit", "reject", "complete", "drop", "teleport", None]),
    "rid": (pa.string(), ["a", "b", "c", "", None]),
    "tenant": (pa.string(), ["x", "y", "", None]),
    "deadline": (pa.float64(), [None, 3.0, -1.0, NAN]),
    "prompt_tokens": (pa.float64(), [None, 3.0, 2.5, -1.0, NAN]),
    "max_tokens": (pa.int64(), [None, 5, -2]),
    "proposal_admit": (pa.bool_(), [None, True, False]),
    "proposal_priority_hint": (pa.float64(), [None, 0.5, NAN]),
    "basis": (pa.string(), [None, "floor", "demoted", "luck"]),
    "reason": (pa.string(), [None, "", "why"]),
    "extra_json": (pa.string(), [None, '{"a": 1}', "[1]", "{"]),
}
rows = st.fixed_dictionaries({k: st.sampled_from(v) for k, (_, v) in CELLS.items()})


def write_table(path: Path, data: list[dict[str, Any]]) -> Path:
    cols = {k: pa.array([r[k] for r in data], type=typ) for k, (typ, _) in CELLS.items()}
    pq.write_table(pa.table(cols), path, row_group_size=5)
    return path


def by_events(path: Path) -> tuple[ColumnarTrace, list[tuple[int, str]]]:
    evs: list[Event] = []
    lines: list[int] = []
    errs: list[tuple[int, str]] = []
    for line, item in iter_parquet(path):
        if isinstance(item, TraceError):
            errs.append((item.line, item.field))
        else:
            evs.append(item)
            lines.append(line)
    return ColumnarTrace.from_events(evs, lines=lines), errs


def assert_same(a: ColumnarTrace, b: ColumnarTrace) -> None:
    for name in ("t", "kind", "rid", "tenant", "deadline", "prompt_tokens", "max_tokens", "basis", "line"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.rid_names, a.tenant_names, a.reason) == (b.rid_names, b.tenant_names, b.reason)
    assert a.proposals == b.proposals


@settings(max_examples=300, deadline=None)
@given(st.lists(rows, max_size=25))
def test_vectorised_agrees_with_event_path(tmp_path_factory: pytest.TempPathFactory, data: list[Any]) -> None:
    p = write_table(tmp_path_factory.mktemp("pc") / "t.parquet", data)
    want, want_errs = by_events(p)
    errors: list[TraceError] = []
    got = parquet_columnar(p, lenient=True, errors=errors)
    assert [(e.line, e.field) for e in errors] == want_errs
    assert all(e.path == str(p) for e in errors)
    assert_same(got, want)
    if want_errs:
        with pytest.raises(TraceFormatError) as info:
            parquet_columnar(p, lenient=False, errors=None)
        assert (info.value.line, info.value.field) == want_errs[0]


def test_read_columnar_parquet_roundtrip(tmp_path: Path) -> None:
    from rvguard.events import Admit, Arrive, Complete, Proposal

    evs: list[Event] = [
        Arrive(t=0.0, rid="a", tenant="gold", deadline=1.8, max_tokens=16, proposal=Proposal(admit=False)),
        Admit(t=0.1, rid="a"),
        Complete(t=0.5, rid="a"),
    ]
    p = tmp_path / "x.parquet"
    write_events(p, evs)
    col = read_columnar(p)
    assert list(col.events()) == evs
    assert col.line.tolist() == [1, 2, 3]


def test_read_columnar_jsonl_keeps_source_lines(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(
        '{"t": 0, "kind": "arrive", "rid": "a", "tenant": "x"}\nbad\n'
        '{"t": 1, "kind": "complete", "rid": "a"}\n'
    )
    errors: list[TraceError] = []
    col = read_columnar(p, lenient=True, errors=errors)
    assert col.line.tolist() == [1, 3]
    assert [e.line for e in errors] == [2]
    with pytest.raises(TraceFormatError):
        read_columnar(p)


def test_lenient_needs_an_errors_list(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="errors="):
        read_columnar(tmp_path / "x.parquet", lenient=True)


def test_a_file_with_runbook_kinds_reads_through_the_event_path(tmp_path: Path) -> None:
    """Rows of DESIGN §10 kinds: the same columns as the event path, bad rows located alike."""
    from rvguard.events import Demote, Sample

    p = tmp_path / "r.parquet"
    evs = [Sample(0.0, "kv", 0.5, 0.0), Demote(1.0, "a", "kv", 0.5)]
    write_events(p, evs)
    assert list(read_columnar(p).events()) == evs
    table = pq.read_table(p)
    bad = table.set_column(table.column_names.index("value"), "value", pa.array([1.5, None]))
    pq.write_table(bad, p)
    errors: list[TraceError] = []
    got = read_columnar(p, lenient=True, errors=errors)
    assert list(got.events()) == evs[1:] and got.line.tolist() == [2]
    assert [(e.line, e.field) for e in errors] == [(1, "value")]
    with pytest.raises(TraceFormatError, match="in \\[0, 1\\]"):
        read_columnar(p)
