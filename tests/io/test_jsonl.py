"""JSON Lines reading and writing: round trips and every bad-input case, located."""

from __future__ import annotations

import io
import json
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.errors import TraceError, TraceFormatError
from rvguard.events import Admit, Arrive, Complete, Event, Proposal
from rvguard.io.jsonl import JsonlWriter, iter_jsonl, parse_jsonl_line

from .trace_strategies import events, names, same

GOOD = '{"t": 0.5, "kind": "arrive", "rid": "r1", "tenant": "assured"}\n'


def write(tmp_path: Path, text: str | bytes, name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    if isinstance(text, str):
        p.write_text(text, encoding="utf-8", newline="")
    else:
        p.write_bytes(text)
    return p


def only_error(path: Path) -> TraceError:
    bad = [(line, item) for line, item in iter_jsonl(path) if isinstance(item, TraceError)]
    assert len(bad) == 1, bad
    line, err = bad[0]
    assert err.line == line
    assert err.path == str(path)
    return err


def roundtrip(tmp_path: Path, evs: list[Event]) -> list[Event]:
    p = tmp_path / "rt.jsonl"
    w = JsonlWriter(p)
    for ev in evs:
        w.write(ev)
    w.close()
    out: list[Event] = []
    for _, item in iter_jsonl(p):
        assert not isinstance(item, TraceError), item
        out.append(item)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(events(text=names), max_size=20))
def test_roundtrip_is_identical_with_extras(
    tmp_path_factory: pytest.TempPathFactory, evs: list[Event]
) -> None:
    assert same(roundtrip(tmp_path_factory.mktemp("j"), evs), evs)


def test_floats_roundtrip_exactly(tmp_path: Path) -> None:
    ts = [0.1, 1 / 3, 2.0**-1074, 999999999999.9999, 123456789.123456789]
    evs: list[Event] = [Complete(t=t, rid=str(i)) for i, t in enumerate(ts)]
    assert [e.t for e in roundtrip(tmp_path, evs)] == ts


def test_written_compact_one_object_a_line(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    w = JsonlWriter(p)
    w.write(Arrive(t=1.0, rid="a", tenant="x", proposal=Proposal(admit=False), extra={"k": [1, 2]}))
    w.write(Admit(t=2.0, rid="a"))
    w.close()
    text = p.read_text(encoding="utf-8")
    assert text == (
        '{"t":1.0,"kind":"arrive","rid":"a","tenant":"x","proposal":{"admit":false},"k":[1,2]}\n'
        '{"t":2.0,"kind":"admit","rid":"a","basis":"surplus"}\n'
    )


def test_writer_refuses_nan_in_extras(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "n.jsonl")
    w.write(Complete(t=0.0, rid="a"))
    with pytest.raises(TraceFormatError) as info:
        w.write(Complete(t=1.0, rid="b", extra={"x": float("nan")}))
    w.close()
    assert info.value.line == 2


def test_extras_kept(tmp_path: Path) -> None:
    p = write(tmp_path, '{"t": 1, "kind": "dispatch", "rid": "a", "slot": 3, "meta": {"gpu": 1}}\n')
    (_, ev), *_ = iter_jsonl(p)
    assert isinstance(ev, Event)
    assert dict(ev.extra) == {"slot": 3, "meta": {"gpu": 1}}


def test_last_line_without_newline_is_fine_when_valid(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD + GOOD.rstrip("\n"))
    assert [line for line, item in iter_jsonl(p) if not isinstance(item, TraceError)] == [1, 2]


def test_crlf_line_ends(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.replace("\n", "\r\n") * 2)
    assert all(isinstance(item, Arrive) for _, item in iter_jsonl(p))


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (GOOD + '{"t": 1, "kind": "arrive", "rid": \n', 2, "", "malformed JSON"),
        (GOOD + GOOD + '{"t": 1, "kind": "adm', 3, "", "truncated last line"),
        (GOOD + "\n" + GOOD, 2, "", "blank line"),
        (GOOD + "   \n", 2, "", "blank line"),
        (GOOD + "\n", 2, "", "blank line"),
        (GOOD + "[1, 2]\n", 2, "", "must be a JSON object, got list"),
        (GOOD + '"x"\n', 2, "", "must be a JSON object, got str"),
        ('{"t": NaN, "kind": "complete", "rid": "a"}\n', 1, "t", "NaN"),
        ('{"t": Infinity, "kind": "complete", "rid": "a"}\n', 1, "t", "Infinity"),
        ('{"t": -Infinity, "kind": "complete", "rid": "a"}\n', 1, "t", "-Infinity"),
        ('{"t": 1e999, "kind": "complete", "rid": "a"}\n', 1, "t", "1e999"),
        ('{"t": 1, "kind": "complete", "rid": "a", "x": [1, NaN]}\n', 1, "x", "NaN"),
        ('{"t": -1, "kind": "complete", "rid": "a"}\n', 1, "t", "negative"),
        ('{"t": "1", "kind": "complete", "rid": "a"}\n', 1, "t", "must be a number"),
        ('{"kind": "complete", "rid": "a"}\n', 1, "t", "missing"),
        ('{"t": 1, "rid": "a"}\n', 1, "kind", "missing"),
        ('{"t": 1, "kind": "teleport", "rid": "a"}\n', 1, "kind", "unknown event kind 'teleport'"),
        ('{"t": 1, "kind": "complete"}\n', 1, "rid", "non-empty string"),
        ('{"t": 1, "kind": "arrive", "rid": "a"}\n', 1, "tenant", "non-empty string"),
        ('{"t": 1, "kind": "arrive", "rid": "a", "tenant": "x", "deadline": -2}\n', 1, "deadline", "negat"),
        ('{"t": 1, "kind": "arrive", "rid": "a", "tenant": "x", "max_tokens": 1.5}\n', 1, "max_tokens", "w"),
        ('{"t": 1, "kind": "admit", "rid": "a", "basis": "luck"}\n', 1, "basis", "one of floor"),
        (
            '{"t": 1, "kind": "arrive", "rid": "a", "tenant": "x", "proposal": {"admit": 1}}\n',
            1,
            "proposal.admit",
            "true or false",
        ),
    ],
)
def test_bad_line_is_located(tmp_path: Path, text: str, line: int, field: str, words: str) -> None:
    p = write(tmp_path, text)
    err = only_error(p)
    assert isinstance(err, TraceFormatError)
    assert (err.line, err.field) == (line, field)
    assert words in str(err)
    assert str(err).startswith(f"{p}:{line}:")


def test_bad_utf8_is_located(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.encode() + b'{"t": 1, "kind": "complete", "rid": "\xff"}\n')
    err = only_error(p)
    assert err.line == 2
    assert "not UTF-8" in str(err)


def test_truncated_only_when_no_newline(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD + '{"t": 1, "kind": "adm\n')
    err = only_error(p)
    assert "truncated" not in err.reason
    assert "malformed JSON" in err.reason


def test_lenient_errors_are_values_and_reading_continues(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD + "oops\n" + GOOD + '{"t": -1, "kind": "complete", "rid": "a"}\n' + GOOD)
    items = list(iter_jsonl(p))
    assert [line for line, _ in items] == [1, 2, 3, 4, 5]
    assert [line for line, item in items if isinstance(item, TraceError)] == [2, 4]
    assert [item.field for _, item in items if isinstance(item, TraceError)] == ["", "t"]


def test_parse_line_is_unlocated() -> None:
    with pytest.raises(TraceFormatError) as info:
        parse_jsonl_line('{"t": 1}')
    assert (info.value.line, info.value.field) == (0, "kind")


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = io.TextIOWrapper(io.BytesIO((GOOD + "x\n").encode()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake)
    items = list(iter_jsonl("-"))
    assert isinstance(items[0][1], Arrive)
    err = items[1][1]
    assert isinstance(err, TraceError)
    assert (err.path, err.line) == ("<stdin>", 2)


def test_streaming_memory_is_constant(tmp_path: Path) -> None:
    p = tmp_path / "big.jsonl"
    rec = {"t": 0.0, "kind": "arrive", "rid": "", "tenant": "assured", "deadline": 1.82, "max_tokens": 48}
    with open(p, "w", encoding="utf-8") as f:
        for i in range(100_000):
            rec["t"], rec["rid"] = i * 0.01, f"r{i}"
            f.write(json.dumps(rec) + "\n")
    assert p.stat().st_size > 8_000_000
    tracemalloc.start()
    n = sum(1 for _ in iter_jsonl(p))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 100_000
    assert peak < 1_000_000, peak
