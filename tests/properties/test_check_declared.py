"""``rvguard check --property FILE`` on a break a built-in guarantee caused: the live gate let a
floor admission out over COOLDOWN (AF first) and traced a ``shield`` alert at that event. The check
reports it as declared, apart from violations (exit 3, ``declared`` in ``--json``); the same trace
with that alert record deleted, or with the alert not naming the guarantee, reports a violation
(exit 1)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.events import event_to_dict

from .test_enforce import COOLDOWN, _req, _run

EX = Path(__file__).resolve().parents[2] / "examples" / "properties"
CONTRACT = """
epoch: 0.0
window: 1.0
slots: 8
output_cap: 1024
service: {s_max: 5.0, lower: 0.0}
tenants:
  acme: {floor: 0, deadline: 10.0, tier: 1}
  assured: {floor: 1, deadline: 10.0, tier: 0}
"""


@pytest.fixture(scope="module")
def records() -> list[dict[str, object]]:
    """The Guard's trace: r2 is admitted on the floor 0.6 s after r1's reject (AF first)."""
    plan = [(0.0, _req("r0", "assured")), (0.5, _req("r1", "assured")), (1.1, _req("r2", "assured"))]
    _, _, trace = asyncio.run(_run([COOLDOWN], plan))
    return [event_to_dict(ev) for ev in trace]


def _shield(rec: dict[str, object]) -> bool:
    return rec["kind"] == "alert" and rec.get("condition") == "shield"


def _check(tmp_path: Path, records: list[dict[str, object]], *flags: str) -> int:
    trace, contract = tmp_path / "trace.jsonl", tmp_path / "contract.yaml"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    contract.write_text(CONTRACT)
    return main(
        ["check", str(trace), "--contract", str(contract), "--property", str(EX / "cooldown.yaml"), *flags]
    )


def test_the_trace_records_the_guarantee_that_went_first(records: list[dict[str, object]]) -> None:
    (alert,) = [r for r in records if _shield(r)]
    assert {k: alert[k] for k in ("property", "request", "event", "first")} == {
        "property": "COOLDOWN",
        "request": "r2",
        "event": "admit",
        "first": "AF",
    }


def test_a_declared_break_is_apart_from_violations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], records: list[dict[str, object]]
) -> None:
    assert _check(tmp_path, records) == 3
    out = capsys.readouterr().out
    assert "property COOLDOWN: holds, 1 declared" in out
    assert "declared: COOLDOWN r2 at t=1.1: AF came first" in out

    assert _check(tmp_path, records, "--json") == 3
    doc = json.loads(capsys.readouterr().out)["tables"]
    assert doc["holds"] is True and doc["violations"] == [] and doc["properties"] == {"COOLDOWN": True}
    (declared,) = doc["declared"]
    assert (declared["property"], declared["rid"], declared["t"], declared["first"]) == (
        "COOLDOWN",
        "r2",
        1.1,
        "AF",
    )
    assert "comes first" in declared["alert"]


def test_without_the_shield_record_the_break_is_a_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], records: list[dict[str, object]]
) -> None:
    deleted = [r for r in records if not _shield(r)]
    assert len(deleted) == len(records) - 1
    assert _check(tmp_path, deleted) == 1
    out = capsys.readouterr().out
    assert (
        "property COOLDOWN: VIOLATED (1)" in out and "COOLDOWN r2 at t=1.1" in out and "declared" not in out
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("first", None), ("request", "r1"), ("property", "TENANT_TOKENS"), ("event", "dispatch")],
)
def test_an_alert_that_does_not_name_the_break_declares_nothing(
    tmp_path: Path, records: list[dict[str, object]], field: str, value: object
) -> None:
    """The alert must name the guarantee, the table, the request and its event (a shadow alert,
    or one about another request, does not excuse this one)."""
    changed = []
    for r in records:
        r = dict(r)
        if _shield(r):
            if value is None:
                del r[field]
            else:
                r[field] = value
        changed.append(r)
    assert _check(tmp_path, changed) == 1
