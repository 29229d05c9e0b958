"""rvguard verify: exit codes, text sentences and the --json shape."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from rvguard.cli import main

HEAD = "window: 1\n"
SPECS = Path(__file__).resolve().parents[2] / "specs"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["verify", *argv])
    return code, out.getvalue(), err.getvalue()


def test_marquee_fails_with_an_actionable_sentence() -> None:
    code, out, _ = run(str(SPECS / "marquee.yaml"))
    assert code == 1
    assert "outside the proven region" in out
    assert "deadline 1.82 s < s_max_opp + ⌈18/4⌉·s_max [18 ahead: assured 6×3" in out
    assert "the smallest deadline that holds is 165.00 s or lower the floor to 1" in out
    assert "assumes: A2 dispatch, A3 envelope, A1 credits, cap, induction" in out


def test_json_shape_and_synthesis() -> None:
    code, out, _ = run(str(SPECS / "marquee.yaml"), "--json", "--synthesize", "floor", "--tenant", "assured")
    doc = json.loads(out)
    assert code == 1
    for ob in doc["obligations"]:
        assert set(ob) == {"name", "holds", "counterexample", "fields", "message", "assumptions"}
    deadline = next(ob for ob in doc["obligations"] if ob["name"] == "deadline[assured]")
    assert any(a.startswith("induction:") for a in deadline["assumptions"])
    assert doc["assumptions"] == [] and "outside the proven region" in doc["verdict"]
    assert doc["synthesis"]["value"] == 1 and doc["synthesis"]["field"] == "tenants.assured.floor"


def test_synthesis_follows_the_backlog_assumption_flag() -> None:
    """With --assume-backlog the synthesised floor is the former one, and the JSON names the assumption."""
    spec = str(SPECS / "marquee.yaml")
    _, out, _ = run(spec, "--json", "--synthesize", "floor", "--assume-backlog")
    doc = json.loads(out)
    assert doc["synthesis"]["value"] == 4
    assert doc["assumptions"] and doc["assumptions"][0].startswith("backlog:")


def test_holding_contract_exits_zero(tmp_path: Path) -> None:
    spec = tmp_path / "ok.json"
    spec.write_text(
        json.dumps(
            {
                "window": 1.0,
                "slots": 4,
                "service": {"s_max": 0.66},
                "tenants": {"a": {"floor": 2, "deadline": 2.0}, "o": {"floor": 0, "deadline": 2, "tier": 1}},
            }
        )
    )
    code, out, _ = run(str(spec))
    assert code == 0 and "inside the proven region" in out


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (HEAD + "slots: 0\nservice: {s_max: 0.5}\ntenants: {a: {deadline: 1}}\n", "slots"),
        (HEAD + "slots: 2\nservice: {s_max: -1}\ntenants: {a: {deadline: 1}}\n", "service.s_max"),
        (
            HEAD + "slots: 2\nservice: {s_max: 0.5}\ntenants: {a: {floor: 2.5, deadline: 1}}\n",
            "tenants.a.floor",
        ),
        (
            HEAD + "slots: 2\nservice: {s_max: 0.5, lower: 0.2, upper: 0.1}\ntenants: {a: {deadline: 1}}\n",
            "service.upper",
        ),
    ],
)
def test_bad_contract_exits_two_naming_the_field(tmp_path: Path, body: str, field: str) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(body)
    code, out, err = run(str(spec))
    assert code == 2 and out == ""
    assert field in err


def test_errors_say_error_like_every_other_command(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("window: -1\n")
    code, _, err = run(str(bad))
    assert code == 2 and err.startswith(f"rvguard verify: error: {bad}:1: window:")


def test_unknown_tenant_exits_two() -> None:
    code, _, err = run(str(SPECS / "marquee.yaml"), "--synthesize", "deadline", "--tenant", "ghost")
    assert code == 2 and "tenants.ghost" in err
