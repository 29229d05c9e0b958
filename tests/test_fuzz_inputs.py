"""Issue 10 item 6: arbitrary input never escapes the readers and loaders except as rvguard's errors.

From arbitrary bytes (a trace line, a whole trace, a contract file) and from
arbitrary JSON values (a record, a contract mapping), the only exceptions
that may escape are `RvguardError`s, and `rvguard check` answers 0, 1 or 2,
never a traceback: 2 exactly when some line or the contract is refused.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.bounds import MAX_TIME, MAX_TOKENS
from rvguard.cli import main
from rvguard.contract import contract_from_mapping, load_contract
from rvguard.errors import RvguardError, SpecError, TraceError
from rvguard.events import event_from_dict, event_to_dict
from rvguard.io import iter_records, read_public

from .conftest import SPECS

MARQUEE = str(SPECS / "marquee.yaml")
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(
        ["arrive", "admit", "reject", "complete", "floor", "assured", "1.0", "\ud800", "\x1b[2J"]
    )
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
)
FIELDS = [
    "t",
    "kind",
    "rid",
    "tenant",
    "deadline",
    "prompt_tokens",
    "max_tokens",
    "proposal",
    "basis",
    "reason",
]
records = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=8)
# Bytes that look like trace text half the time: JSON fragments, separators, a BOM, deep brackets.
_PIECES = [b"{", b"}", b"[", b"]", b'"t":', b'"kind":"arrive"', b'"rid":', b",", b"1e999", b"\xef\xbb\xbf"]
trace_bytes = st.binary(max_size=300) | st.lists(
    st.sampled_from([*_PIECES, b"\n", b"\r\n", b"0", b"-1", b"\xff", b"9" * 30]), max_size=60
).map(b"".join)
CONTRACT_KEYS = ["epoch", "window", "slots", "output_cap", "excess", "credit", "service", "tenants"]
contract_maps = st.dictionaries(st.sampled_from(CONTRACT_KEYS) | st.text(max_size=6), json_values, max_size=8)


@FUZZ
@given(rec=records)
def test_any_json_record_is_an_event_or_a_trace_error(rec: dict[str, Any]) -> None:
    try:
        ev = event_from_dict(rec)
    except TraceError:
        return
    again = event_from_dict(json.loads(json.dumps(event_to_dict(ev))))  # what is accepted round-trips
    assert again == ev


@FUZZ
@given(data=contract_maps)
def test_any_json_mapping_is_a_contract_or_a_spec_error(data: dict[str, Any]) -> None:
    try:
        contract = contract_from_mapping(data)
    except SpecError:
        return
    assert contract_from_mapping(contract.model_dump(mode="json")) == contract


def _read_all(path: Path) -> list[object]:
    return [item for _, item in iter_records(path)]


@FUZZ
@given(blob=trace_bytes, suffix=st.sampled_from([".jsonl", ".csv", ".parquet"]))
def test_any_bytes_read_as_records_or_located_errors(tmp_path: Path, blob: bytes, suffix: str) -> None:
    p = tmp_path / f"fuzz{suffix}"
    p.write_bytes(blob)
    try:
        items = _read_all(p)
    except RvguardError:
        return
    for item in items:
        if isinstance(item, TraceError):
            assert item.path == str(p)


@FUZZ
@given(blob=trace_bytes, suffix=st.sampled_from([".yaml", ".json"]))
def test_any_bytes_load_as_a_contract_or_a_spec_error(tmp_path: Path, blob: bytes, suffix: str) -> None:
    p = tmp_path / f"c{suffix}"
    p.write_bytes(blob)
    with pytest.raises(SpecError):
        load_contract(p)


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _line(value: Any) -> bytes:
    try:
        return json.dumps(value).encode("utf-8", "surrogatepass")
    except ValueError:
        return b"{}"


@FUZZ
@given(lines=st.lists(records.map(_line) | trace_bytes, min_size=1, max_size=5))
def test_cli_check_answers_2_for_any_bad_line_and_never_a_traceback(
    tmp_path: Path, lines: list[bytes]
) -> None:
    p = tmp_path / "fuzz.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    code, _, err = _run(["check", str(p), "--contract", MARQUEE])
    refused = any(isinstance(item, TraceError) for item in _read_all(p))
    if refused:
        assert code == 2, err
    else:
        assert code in (0, 1, 2), err
    assert "Traceback" not in err


@FUZZ
@given(blob=trace_bytes | contract_maps.map(_line))
def test_cli_answers_2_for_a_bad_contract(tmp_path: Path, blob: bytes) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"t":0,"kind":"arrive","rid":"a","tenant":"assured"}\n')
    p = tmp_path / "c.json"
    p.write_bytes(blob)
    code, _, err = _run(["check", str(trace), "--contract", str(p)])
    assert code == 2, err
    assert err.startswith("rvguard check: error:")


_HEADERS = {
    "azure": b"TIMESTAMP,ContextTokens,GeneratedTokens\n",
    "burstgpt": b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n",
    "mooncake": b"",
}
_ROWS = [
    b"2023-11-16 18:17:03.9799600,1,2",
    b"1" * 400,
    b"1e400",
    b"5,M,1,2,3,x",
    b'{"timestamp": ',
    b"1" * 5000,
]
_ROWS += [b'{"timestamp": 1, "input_length": 2, "output_length": 3}', b"[" * 3000, b"\xff", b'"', b"-1"]
public_bytes = st.lists(
    st.sampled_from([*_ROWS, b",", b"\n", b": ", b"}"]) | st.binary(max_size=20), max_size=12
)


@FUZZ
@given(fmt=st.sampled_from(sorted(_HEADERS)), body=public_bytes)
def test_any_public_trace_reads_as_arrivals_or_a_trace_error(
    tmp_path: Path, fmt: str, body: list[bytes]
) -> None:
    p = tmp_path / ("t.jsonl" if fmt == "mooncake" else "t.csv")
    p.write_bytes(_HEADERS[fmt] + b"".join(body))
    try:
        arrivals = read_public(p, fmt)  # type: ignore[arg-type]
    except TraceError:
        return
    for a in arrivals:
        assert (
            0 <= a.t <= MAX_TIME and 0 <= a.prompt_tokens <= MAX_TOKENS and 0 <= a.output_tokens <= MAX_TOKENS
        )
