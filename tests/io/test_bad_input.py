"""Issue 10 items 6 and 8: every numeric field's bound, alike in JSONL, CSV and Parquet.

Each case was a traceback (``OverflowError``, ``ValueError``,
``RecursionError``, ``UnicodeEncodeError``) or a silent acceptance before the
bounds of `rvguard.bounds`; now each is one located `TraceFormatError`
naming the line and the field, and ``rvguard check`` exits 2.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rvguard.bounds import MAX_TIME, MAX_TOKENS
from rvguard.cli import main
from rvguard.errors import TraceError, TraceFormatError
from rvguard.events import Arrive
from rvguard.io import iter_records, read_columnar
from rvguard.io.csv import COLUMNS

from ..conftest import SPECS

MARQUEE = str(SPECS / "marquee.yaml")
HUGE = 10**400  # beyond float range
ARRIVE = {"t": 1, "kind": "arrive", "rid": "a", "tenant": "assured"}


def arrive(**fields: Any) -> dict[str, Any]:
    return {**ARRIVE, **fields}


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_csv(path: Path, records: list[dict[str, Any]]) -> Path:
    def cell(rec: dict[str, Any], column: str) -> str:
        if column.startswith("proposal_"):
            value = (rec.get("proposal") or {}).get(column.removeprefix("proposal_"))
        else:
            value = rec.get(column)
        return "" if value is None else str(value)

    rows = [",".join(COLUMNS)] + [",".join(cell(r, c) for c in COLUMNS) for r in records]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def errors(path: Path) -> list[tuple[int, str]]:
    return [(e.line, e.field) for _, e in iter_records(path) if isinstance(e, TraceError)]


def check_exit(path: Path, *extra: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["check", str(path), "--contract", MARQUEE, *extra])
    return code, err.getvalue()


BOUNDS = [
    (arrive(t=HUGE), "t"),
    (arrive(t=MAX_TIME * 10), "t"),
    (arrive(deadline=HUGE), "deadline"),
    (arrive(deadline=0.5), "deadline"),  # before its own arrival at t = 1
    (arrive(max_tokens=HUGE), "max_tokens"),
    (arrive(max_tokens=MAX_TOKENS + 1), "max_tokens"),
    (arrive(prompt_tokens=HUGE), "prompt_tokens"),
    (arrive(proposal={"priority_hint": HUGE}), "proposal.priority_hint"),
]


@pytest.mark.parametrize(("record", "field"), BOUNDS)
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_out_of_bounds_fields_are_located_errors(
    tmp_path: Path, fmt: str, record: dict[str, Any], field: str
) -> None:
    writer = write_jsonl if fmt == "jsonl" else write_csv
    p = writer(tmp_path / f"t.{fmt}", [record])
    line = 1 if fmt == "jsonl" else 2
    assert errors(p) == [(line, field)]
    code, err = check_exit(p, "--phase-sweep", "2")
    assert code == 2
    assert f"{p}:{line}: field '{field}'" in err


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (arrive(t=MAX_TIME), ""),
        (arrive(deadline=1), ""),  # a deadline equal to t is on the bound, not before it
        (arrive(max_tokens=MAX_TOKENS, prompt_tokens=0), ""),
        (arrive(proposal={"priority_hint": 1.7e308}), ""),
        (arrive(rid=2**64 - 1), ""),
        (arrive(rid=2**64), "rid"),
    ],
)
def test_values_on_the_bounds_are_read(tmp_path: Path, record: dict[str, Any], field: str) -> None:
    want = [(1, field)] if field else []
    assert errors(write_jsonl(tmp_path / "t.jsonl", [record])) == want


def test_integers_beyond_the_digit_limit_are_located(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"t": 1, "kind": "arrive", "rid": 1' + "0" * 5000 + ', "tenant": "assured"}\n')
    assert errors(p) == [(1, "rid")]
    csv = tmp_path / "t.csv"
    csv.write_text("t,kind,rid,tenant,max_tokens\n1,arrive,a,assured,1" + "0" * 5000 + "\n")
    assert errors(csv) == [(2, "max_tokens")]
    assert check_exit(p)[0] == check_exit(csv)[0] == 2


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    p.write_text('{"t": 1, "kind": "complete", "rid": "a", "x": ' + deep + "}\n" + json.dumps(ARRIVE) + "\n")
    out = list(iter_records(p))
    assert isinstance(out[0][1], TraceFormatError) and "deeper than 64" in out[0][1].reason
    assert isinstance(out[1][1], Arrive)
    # a bracket inside a string is not nesting
    q = write_jsonl(tmp_path / "s.jsonl", [arrive(note="[" * 200)])
    assert errors(q) == []


def test_a_lone_surrogate_rid_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"t": 1, "kind": "arrive", "rid": "a\\ud800", "tenant": "assured"}\n')
    assert errors(p) == [(1, "rid")]
    code, err = check_exit(p)
    assert code == 2 and "lone surrogate U+D800" in err


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"t": 1, "kind": "arrive", "rid": "a", "tenant": "assured", "t": 0}\n')
    out = list(iter_records(p))
    assert isinstance(out[0][1], TraceFormatError)
    assert (out[0][1].field, out[0][1].reason) == ("t", "duplicate key 't'")
    nested = tmp_path / "n.jsonl"
    nested.write_text(
        '{"t": 1, "kind": "arrive", "rid": "a", "tenant": "x", "proposal": {"admit": true, "admit": false}}\n'
    )
    assert errors(nested) == [(1, "admit")]


def test_a_bom_starts_a_file_and_nowhere_else(tmp_path: Path) -> None:
    line = json.dumps(ARRIVE).encode()
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + line + b"\n")
    assert errors(p) == []
    p.write_bytes(line + b"\n\xef\xbb\xbf" + line + b"\n")
    assert [line for line, _ in errors(p)] == [2]
    csv = tmp_path / "t.csv"
    csv.write_bytes(b"\xef\xbb\xbft,kind,rid,tenant\n1,arrive,a,assured\n")
    assert errors(csv) == []


def _parquet(path: Path, columns: dict[str, Any]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_parquet_uint64_beyond_int64_is_refused_on_both_paths(tmp_path: Path) -> None:
    p = _parquet(
        tmp_path / "t.parquet",
        {
            "t": pa.array([1.0, 2.0], type=pa.float64()),
            "kind": ["arrive", "arrive"],
            "rid": ["a", "b"],
            "tenant": ["assured", "assured"],
            "max_tokens": pa.array([2**64 - 1, 5], type=pa.uint64()),
        },
    )
    assert errors(p) == [(1, "max_tokens")]
    found: list[TraceError] = []
    cols = read_columnar(p, lenient=True, errors=found)
    assert [(e.line, e.field) for e in found] == [(1, "max_tokens")]
    assert list(cols.max_tokens) == [5]
    code, err = check_exit(p, "--phase-sweep", "3")
    assert code == 2 and "field 'max_tokens'" in err


def test_parquet_times_and_deadlines_have_the_same_bounds(tmp_path: Path) -> None:
    p = _parquet(
        tmp_path / "t.parquet",
        {
            "t": pa.array([2**64 - 1, 5, 5], type=pa.uint64()),
            "kind": ["arrive", "arrive", "arrive"],
            "rid": ["a", "b", "c"],
            "tenant": ["assured"] * 3,
            "deadline": pa.array([None, 4.0, 5.0]),
        },
    )
    assert errors(p) == [(1, "t"), (2, "deadline")]
    found: list[TraceError] = []
    read_columnar(p, lenient=True, errors=found)
    assert [(e.line, e.field, e.reason) for e in found] == [
        (e.line, e.field, e.reason) for _, e in iter_records(p) if isinstance(e, TraceError)
    ]


def test_parquet_extra_json_follows_the_jsonl_rules(tmp_path: Path) -> None:
    """A deep extra_json cell raised RecursionError; a repeated key or NaN passed silently."""
    cells = ['{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"a": 1, "a": 2}', '{"a": NaN}', '{"a": 1}']
    p = _parquet(
        tmp_path / "t.parquet",
        {
            "t": pa.array([1.0] * 4),
            "kind": ["complete"] * 4,
            "rid": ["a", "b", "c", "d"],
            "extra_json": cells,
        },
    )
    assert errors(p) == [(1, "extra_json"), (2, "extra_json"), (3, "extra_json")]
    found: list[TraceError] = []
    read_columnar(p, lenient=True, errors=found)
    assert [(e.line, e.field, e.reason) for e in found] == [
        (e.line, e.field, e.reason) for _, e in iter_records(p) if isinstance(e, TraceError)
    ]
