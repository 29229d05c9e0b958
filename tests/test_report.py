"""The readable report of `rvguard check`: tables, the claims, the P95 note."""

from __future__ import annotations

from pathlib import Path

from rvguard.check import check_trace
from rvguard.contract import Contract
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
