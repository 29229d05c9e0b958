"""CSV traces: columns, extras, number parsing, located errors, round trips."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.errors import TraceError, TraceFormatError
from rvguard.events import Admit, Arrive, Basis, Complete, Event, Proposal
from rvguard.io.csv import COLUMNS, CsvWriter, iter_csv

from .trace_strategies import events, same

HEADER = ",".join(COLUMNS) + "\n"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(text, encoding="utf-8", newline="")
    return p


def items(p: Path) -> list[tuple[int, Event | TraceError]]:
    return list(iter_csv(p))


def only_error(p: Path) -> TraceError:
    bad = [(line, e) for line, e in items(p) if isinstance(e, TraceError)]
    assert len(bad) == 1, bad
    assert bad[0][1].line == bad[0][0]
    assert bad[0][1].path == str(p)
    return bad[0][1]


def roundtrip(tmp_path: Path, evs: list[Event], extra: list[str]) -> list[Event]:
    p = tmp_path / "rt.csv"
    w = CsvWriter(p, extra_columns=extra)
    for ev in evs:
        w.write(ev)
    w.close()
    out = items(p)
    assert [line for line, _ in out] == list(range(2, len(evs) + 2))
    assert not [e for _, e in out if isinstance(e, TraceError)]
    return [e for _, e in out if not isinstance(e, TraceError)]


@settings(max_examples=200, deadline=None)
@given(st.lists(events(), max_size=20))
def test_roundtrip_is_identical_with_extras(
    tmp_path_factory: pytest.TempPathFactory, evs: list[Event]
) -> None:
    extra = list(dict.fromkeys(k for e in evs for k in e.extra))
    assert same(roundtrip(tmp_path_factory.mktemp("c"), evs, extra), evs)


def test_full_row_parses(tmp_path: Path) -> None:
    p = write(tmp_path, HEADER + "1.5,arrive,007,assured,3.25,100,48,false,fast,-2.5,,,,,,,,,,,,,,,,\n")
    ((line, ev),) = items(p)
    assert line == 2
    assert ev == Arrive(
        t=1.5,
        rid="007",
        tenant="assured",
        deadline=3.25,
        prompt_tokens=100,
        max_tokens=48,
        proposal=Proposal(admit=False, objective="fast", priority_hint=-2.5),
    )


def test_minimal_columns_and_extras(tmp_path: Path) -> None:
    p = write(tmp_path, "rid,kind,t,gpu,note\na,admit,2,3,hello\nb,complete,4.5,,\n")
    (_, a), (_, b) = items(p)
    assert a == Admit(t=2.0, rid="a", basis=Basis.SURPLUS)
    assert isinstance(a, Event)
    assert dict(a.extra) == {"gpu": 3, "note": "hello"}
    assert b == Complete(t=4.5, rid="b")
    assert isinstance(b, Event)
    assert dict(b.extra) == {}


def test_crlf_and_bom(tmp_path: Path) -> None:
    p = tmp_path / "w.csv"
    p.write_bytes(b"\xef\xbb\xbft,kind,rid\r\n1,complete,a\r\n")
    ((line, ev),) = items(p)
    assert (line, ev) == (2, Complete(t=1.0, rid="a"))


def test_line_numbers_count_physical_lines(tmp_path: Path) -> None:
    p = write(tmp_path, 't,kind,rid,reason\n1,reject,a,"two\nlines"\n2,complete,b,\n3,teleport,c,\n')
    out = items(p)
    assert [line for line, _ in out] == [2, 4, 5]
    err = out[2][1]
    assert isinstance(err, TraceError)
    assert (err.line, err.field) == (5, "kind")


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("", 1, "", "empty file"),
        ("t,kind\n1,complete\n", 1, "rid", "missing column"),
        ("t,kind,rid,t\n", 1, "t", "duplicate column"),
        (HEADER.replace("reason", "t"), 1, "t", "duplicate column"),
        ("t,kind,rid\n1,complete,a\n\n2,complete,b\n", 3, "", "blank line"),
        ("t,kind,rid\n1,complete,a,extra\n", 2, "", "has 4 cells, the header has 3"),
        ("t,kind,rid\n1,complete,a\n2,comp", 3, "", "truncated last line"),
        ("t,kind,rid\nnan,complete,a\n", 2, "t", "must be a number, got 'nan'"),
        ("t,kind,rid\ninf,complete,a\n", 2, "t", "must be a number"),
        ("t,kind,rid\n1e999,complete,a\n", 2, "t", "non-finite"),
        ("t,kind,rid\n-1,complete,a\n", 2, "t", "negative"),
        ("t,kind,rid\nsoon,complete,a\n", 2, "t", "must be a number, got 'soon'"),
        ("t,kind,rid\n,complete,a\n", 2, "t", "missing"),
        ("t,kind,rid\n1,,a\n", 2, "kind", "missing"),
        ("t,kind,rid\n1,teleport,a\n", 2, "kind", "unknown event kind"),
        ("t,kind,rid\n1,complete,\n", 2, "rid", "non-empty string"),
        ("t,kind,rid,tenant\n1,arrive,a,\n", 2, "tenant", "non-empty string"),
        ("t,kind,rid,tenant,max_tokens\n1,arrive,a,x,-3\n", 2, "max_tokens", "whole number in [0, 2"),
        ("t,kind,rid,basis\n1,admit,a,luck\n", 2, "basis", "one of floor"),
        ("t,kind,rid,tenant,proposal_admit\n1,arrive,a,x,maybe\n", 2, "proposal.admit", "true or false"),
        ("t,kind,rid,x\n1,complete,a,1e999\n", 2, "x", "non-finite"),
        ('t,kind,rid\n1,complete,"a\n', 2, "", "malformed CSV"),
    ],
)
def test_bad_input_is_located(tmp_path: Path, text: str, line: int, field: str, words: str) -> None:
    err = only_error(write(tmp_path, text))
    assert isinstance(err, TraceFormatError)
    assert (err.line, err.field) == (line, field)
    assert words in err.reason


def test_lenient_continues_with_right_lines(tmp_path: Path) -> None:
    p = write(tmp_path, "t,kind,rid\n1,complete,a\n-1,complete,b\n2,complete,c\nx,y\n3,complete,d\n")
    out = items(p)
    assert [line for line, _ in out] == [2, 3, 4, 5, 6]
    assert [line for line, e in out if isinstance(e, TraceError)] == [3, 5]


def test_writer_header_from_first_event_and_loud_on_new_field(tmp_path: Path) -> None:
    p = tmp_path / "w.csv"
    w = CsvWriter(p)
    w.write(Complete(t=1.0, rid="a", extra={"gpu": 1}))
    with pytest.raises(TraceFormatError) as info:
        w.write(Complete(t=2.0, rid="b", extra={"other": 2}))
    w.close()
    assert (info.value.line, info.value.field) == (3, "other")
    assert p.read_text().splitlines()[0] == HEADER.strip() + ",gpu"


def test_writer_cells(tmp_path: Path) -> None:
    p = tmp_path / "w.csv"
    w = CsvWriter(p, extra_columns=["k"])
    w.write(Arrive(t=0.1, rid="a", tenant="x", proposal=Proposal(admit=True), extra={"k": [1, 2]}))
    w.close()
    assert p.read_text().splitlines()[1] == '0.1,arrive,a,x,,,,true,,,,,,,,,,,,,,,,,,,"[1,2]"'


def test_empty_writer_still_writes_header(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    CsvWriter(p).close()
    assert p.read_text() == HEADER
    assert items(p) == []
