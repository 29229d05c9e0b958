"""`rvguard check`: exit codes, readable and JSON output, bad input never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rvguard.cli import main

from .conftest import SPECS

MARQUEE = str(SPECS / "marquee.yaml")

GOOD = [
    {"t": 0.0, "kind": "arrive", "rid": "a", "tenant": "assured"},
    {"t": 0.0, "kind": "admit", "rid": "a", "basis": "floor"},
    {"t": 0.1, "kind": "dispatch", "rid": "a"},
    {"t": 0.5, "kind": "complete", "rid": "a"},
    {"t": 0.6, "kind": "arrive", "rid": "o", "tenant": "opportunistic", "proposal": {"admit": False}},
    {"t": 0.6, "kind": "reject", "rid": "o", "reason": "learner"},
]


def write(tmp_path: Path, records: list[dict[str, object]], name: str = "t.jsonl") -> str:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(p)


def test_clean_trace_exits_0_with_a_readable_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", write(tmp_path, GOOD), "--contract", MARQUEE]) == 0
    out = capsys.readouterr().out
    assert "floor attainment" in out and "no violation so far" in out and "P95" in out


def test_violation_exits_1_and_json_has_the_design_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [
        *GOOD,
        {"t": 0.7, "kind": "arrive", "rid": "b", "tenant": "assured"},
        {"t": 0.8, "kind": "reject", "rid": "b"},
    ]
    assert main(["check", write(tmp_path, bad), "--contract", MARQUEE, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    [v] = doc["violations"]
    assert (v["property"], v["rid"], v["t"]) == ("AF", "b", 0.8)
    assert [w["kind"] for w in v["witness"]] == ["arrive", "reject"]
    for key in (
        "entitled",
        "entitled_attained",
        "floor_attainment",
        "admitted_miss",
        "offered_unmet",
        "max_assured_backlog",
    ):
        assert key in doc["metrics"]
    assert doc["metrics"]["entitled"] == 2 and doc["metrics"]["entitled_attained"] == 1
    assert "precondition" in doc["properties"]["SF"]


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ('{"t": 0.1, "kind": "arrive", "rid": "x", "tenant": "assured"', "", "truncated"),
        ('{"t": -1, "kind": "dispatch", "rid": "a"}', "t", "negative"),
        ('{"t": NaN, "kind": "dispatch", "rid": "a"}', "t", ""),
        ('{"t": 0.2, "kind": "explode", "rid": "a"}', "kind", "unknown event kind"),
        ('{"t": 0.2, "kind": "dispatch"}', "rid", ""),
        ('{"t": 0.05, "kind": "dispatch", "rid": "a"}', "t", "before"),
        ('{"t": 0.2, "kind": "arrive", "rid": "a", "tenant": "assured"}', "rid", "duplicate"),
        ('{"t": 0.2, "kind": "complete", "rid": "zzz"}', "rid", "never arrived"),
        ('{"t": 0.2, "kind": "arrive", "rid": "n", "tenant": "mallory"}', "tenant", "not in the contract"),
    ],
)
def test_bad_input_exits_2_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, field: str, message: str
) -> None:
    p = tmp_path / "bad.jsonl"
    body = "".join(json.dumps(r) + "\n" for r in GOOD[:3]) + line
    p.write_text(body if "truncated" in message else body + "\n")
    assert main(["check", str(p), "--contract", MARQUEE]) == 2
    err = capsys.readouterr().err
    assert f"{p}:4" in err
    assert f"field '{field}'" in err if field else True
    assert message in err


def test_lenient_reports_bad_lines_by_number_and_checks_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "t.jsonl"
    lines = [json.dumps(r) for r in GOOD]
    lines.insert(2, "{not json")
    lines.insert(4, json.dumps({"t": 0.2, "kind": "complete", "rid": "ghost"}))
    p.write_text("\n".join(lines) + "\n")
    assert main(["check", str(p), "--contract", MARQUEE, "--lenient", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [b["line"] for b in doc["bad_lines"]] == [3, 5]
    assert doc["metrics"]["requests"] == 2 and doc["metrics"]["entitled_attained"] == 1


def test_bad_contract_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c = tmp_path / "c.yaml"
    c.write_text("window: 1\nslots: 0\nservice: {s_max: 1}\ntenants: {a: {deadline: 1}}\n")
    assert main(["check", write(tmp_path, GOOD), "--contract", str(c)]) == 2
    assert "slots" in capsys.readouterr().err


def test_phase_sweep_finds_rejections_entitled_at_another_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 6 arrivals in [0.5, 1) and 6 in [1, 1.5): a guard with origin 0.5 rejects the second six
    recs: list[dict[str, object]] = []
    for i in range(12):
        t = 0.5 + 0.08 * i if i < 6 else 1.0 + 0.08 * (i - 6)
        rid = f"r{i}"
        recs.append({"t": t, "kind": "arrive", "rid": rid, "tenant": "assured"})
        if i < 6:
            recs += [
                {"t": t, "kind": "admit", "rid": rid, "basis": "floor"},
                {"t": t, "kind": "dispatch", "rid": rid},
                {"t": t, "kind": "complete", "rid": rid},
            ]
        else:
            recs.append({"t": t, "kind": "reject", "rid": rid, "reason": "excess"})
    code = main(["check", write(tmp_path, recs), "--contract", MARQUEE, "--phase-sweep", "4", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1  # at φ = 0 the second six are entitled in window 1: AF violations
    sweep = doc["phase_sweep"]
    assert len(sweep["rows"]) == 4
    at_half = next(r for r in sweep["rows"] if r["phase"] == 0.5)
    assert at_half["attainment"] == 1.0
    assert sweep["worst_attainment"] == 0.5


@pytest.mark.parametrize("which", ["missing", "directory"])
def test_unreadable_trace_exits_2_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    path = tmp_path / "nope.jsonl" if which == "missing" else tmp_path
    assert main(["check", str(path), "--contract", MARQUEE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rvguard check: error: ") and str(path) in err and "Traceback" not in err


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    """``rvguard check --json big.jsonl | head -c 100``: the JSON (> a 64 KB pipe) meets a closed pipe."""
    records = []
    for i in range(3000):  # one window each: a long per-window table in the JSON
        records += [
            {"t": i * 1.0, "kind": "arrive", "rid": f"r{i}", "tenant": "assured"},
            {"t": i * 1.0, "kind": "admit", "rid": f"r{i}", "basis": "floor"},
            {"t": i * 1.0, "kind": "dispatch", "rid": f"r{i}"},
            {"t": i * 1.0 + 0.1, "kind": "complete", "rid": f"r{i}"},
        ]
    cmd = [
        sys.executable,
        "-m",
        "rvguard.cli",
        "check",
        write(tmp_path, records),
        "--contract",
        MARQUEE,
        "--json",
    ]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.read(100).startswith(b"{")
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=60)
    assert code == 0 and err == "", err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--properties", ""], "--properties names no property"),
        (["--properties", " , "], "--properties names no property"),
        (["--phase-sweep", "100000000"], "--phase-sweep wants 1..10000"),
    ],
)
def test_options_that_would_check_nothing_or_run_for_ever_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    assert main(["check", write(tmp_path, GOOD), "--contract", MARQUEE, *extra]) == 2
    assert said in capsys.readouterr().err


def test_console_script_never_prints_a_traceback(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text("[1, 2]\n")
    out = subprocess.run(
        [sys.executable, "-m", "rvguard.cli", "check", str(p), "--contract", MARQUEE],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr and ":1" in out.stderr
