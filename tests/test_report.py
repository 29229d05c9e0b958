"""The readable report of `rvguard check`: tables, the claims, the P95 note."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.bounds import printable
from rvguard.check import check_trace
from rvguard.contract import Contract
from rvguard.errors import TraceFormatError
from rvguard.events import Admit, Arrive, Basis, Reject
from rvguard.io import write_events
from rvguard.report import render_check, table


def test_table_aligns_columns() -> None:
    out = table(["a", "bbb"], [(1, None), ("long", 0.123456)]).splitlines()
    assert out[1] == "----  ------"
    assert out[2].startswith("1     -")
    assert out[3] == "long  0.1235"


def test_report_states_verdicts_claims_and_the_p95_note(marquee: Contract, tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    write_events(
        p,
        [
            Arrive(0.0, "a", "assured"),
            Admit(0.0, "a", Basis.FLOOR),
            Arrive(0.1, "b", "assured"),
            Reject(0.1, "b"),
        ],
    )
    text = render_check(check_trace(str(p), marquee))
    assert "AF        VIOLATED" in text
    assert "only under the contract's preconditions" in text
    assert "P95" in text
    assert text.rstrip().endswith("verdict: VIOLATED")


def _report_with(contract: Contract, rid: str, reason: str) -> str:
    events = [(1, Arrive(0.0, rid, "assured")), (2, Reject(0.1, rid, reason))]
    bad = TraceFormatError(f"crafted {reason}", line=3, field=rid)
    report = check_trace(
        "t\x1b[2J.jsonl", contract, lenient=True, records=lambda _path: iter([*events, (3, bad)])
    )
    return render_check(report)


def test_issue_10_crafted_rids_cannot_print_escapes_or_fake_lines(marquee: Contract) -> None:
    """A rid with an ANSI escape and a newline once printed a colour change and a fake verdict line."""
    text = _report_with(marquee, "a\x1b[31m\nverdict: no violation so far", "x\r\nverdict: ok\u2028")
    assert "\x1b" not in text and "\r" not in text and "\u2028" not in text
    assert [line for line in text.splitlines() if line.startswith("verdict:")] == ["verdict: VIOLATED"]
    assert "a\\x1b[31m\\nverdict: no violation so far" in text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rid=st.text(min_size=1, max_size=12), reason=st.text(max_size=12))
def test_the_text_report_is_printable_whatever_the_rids(marquee: Contract, rid: str, reason: str) -> None:
    text = _report_with(marquee, rid, reason)
    text.encode("utf-8")  # a lone surrogate once raised UnicodeEncodeError at print
    assert all(line.isprintable() for line in text.splitlines())
    assert text.count("\nverdict:") == 1 and text.rstrip().splitlines()[-1].startswith("verdict:")


def test_printable_is_unambiguous() -> None:
    assert printable("plain é 中") == "plain é 中"
    assert printable("a\\x1b") != printable("a\x1b")
    assert printable("\ud800\t") == "\\ud800\\t"
