"""Parquet traces: round trips (extras included), batches, located errors, lazy pyarrow."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.errors import MissingExtraError, TraceError, TraceFormatError
from rvguard.events import Arrive, Complete, Event, Proposal
from rvguard.io.parquet import ParquetWriter, iter_parquet

from .trace_strategies import events, names, same


def roundtrip(path: Path, evs: list[Event], batch_rows: int = 7) -> list[Event]:
    w = ParquetWriter(path, batch_rows=batch_rows)
    for ev in evs:
        w.write(ev)
    w.close()
    out = list(iter_parquet(path))
    assert [line for line, _ in out] == list(range(1, len(evs) + 1))
    assert not [e for _, e in out if isinstance(e, TraceError)]
    return [e for _, e in out if not isinstance(e, TraceError)]


@settings(max_examples=100, deadline=None)
@given(st.lists(events(text=names), max_size=20))
def test_roundtrip_is_identical_with_extras(
    tmp_path_factory: pytest.TempPathFactory, evs: list[Event]
) -> None:
    assert same(roundtrip(tmp_path_factory.mktemp("p") / "t.parquet", evs), evs)


def test_writes_in_record_batches(tmp_path: Path) -> None:
    p = tmp_path / "b.parquet"
    evs: list[Event] = [Complete(t=float(i), rid=str(i)) for i in range(25)]
    assert roundtrip(p, evs, batch_rows=10) == evs
    meta = pq.ParquetFile(p).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [10, 10, 5]


def table(path: Path, cols: dict[str, list[Any]]) -> Path:
    pq.write_table(pa.table(cols), path)
    return path


def test_foreign_file_extra_columns_and_int_rids(tmp_path: Path) -> None:
    p = table(
        tmp_path / "f.parquet",
        {
            "t": [1, 2],
            "kind": ["arrive", "complete"],
            "rid": [7, 7],
            "tenant": ["a", None],
            "proposal_admit": [False, None],
            "gpu": [3, None],
        },
    )
    (_, a), (_, c) = iter_parquet(p)
    assert a == Arrive(t=1.0, rid="7", tenant="a", proposal=Proposal(admit=False))
    assert isinstance(a, Event)
    assert dict(a.extra) == {"gpu": 3}
    assert c == Complete(t=2.0, rid="7")


@pytest.mark.parametrize(
    ("cols", "line", "field"),
    [
        ({"t": [1.0, float("nan")], "kind": ["complete"] * 2, "rid": ["a", "b"]}, 2, "t"),
        ({"t": [1.0, -1.0], "kind": ["complete"] * 2, "rid": ["a", "b"]}, 2, "t"),
        ({"t": [1.0, float("inf")], "kind": ["complete"] * 2, "rid": ["a", "b"]}, 2, "t"),
        ({"t": [1.0, None], "kind": ["complete"] * 2, "rid": ["a", "b"]}, 2, "t"),
        ({"t": [1.0, 2.0], "kind": ["complete", "teleport"], "rid": ["a", "b"]}, 2, "kind"),
        ({"t": [1.0, 2.0], "kind": ["complete"] * 2, "rid": ["a", None]}, 2, "rid"),
        ({"t": [1.0, 2.0], "kind": ["arrive"] * 2, "rid": ["a", "b"], "tenant": ["x", None]}, 2, "tenant"),
        ({"t": [1.0], "kind": ["complete"], "rid": ["a"], "extra_json": ["{"]}, 1, "extra_json"),
    ],
)
def test_bad_rows_are_located(tmp_path: Path, cols: dict[str, list[Any]], line: int, field: str) -> None:
    p = table(tmp_path / "bad.parquet", cols)
    bad = [(n, e) for n, e in iter_parquet(p) if isinstance(e, TraceError)]
    assert len(bad) == 1
    n, err = bad[0]
    assert isinstance(err, TraceFormatError)
    assert (n, err.line, err.field, err.path) == (line, line, field, str(p))


def test_not_parquet(tmp_path: Path) -> None:
    p = tmp_path / "x.parquet"
    p.write_text("hello")
    ((line, err),) = iter_parquet(p)
    assert line == 0
    assert isinstance(err, TraceFormatError)
    assert "not a readable Parquet file" in err.reason


def test_missing_pyarrow_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    for mod in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingExtraError) as info:
        list(iter_parquet(tmp_path / "x.parquet"))
    assert (info.value.package, info.value.extra) == ("pyarrow", "parquet")
    assert "rvguard[parquet]" in str(info.value)
