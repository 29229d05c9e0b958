"""``rvguard check --property FILE``: the tables judged on a trace file, online and offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main

EX = Path(__file__).resolve().parents[2] / "examples" / "properties"
ARGS = ["--contract", str(EX / "run" / "contract.yaml"), "--property", str(EX / "tenant_concurrency.yaml")]


def test_a_violating_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(EX / "run" / "concurrency_trace.jsonl"), *ARGS]) == 1
    out = capsys.readouterr().out
    assert "property TENANT_CONCURRENCY: VIOLATED (1)" in out and "[vectorised]" in out
    assert "r2 at t=0.2" in out and "running + 1 <= k" in out


def test_a_compliant_trace_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = (EX / "run" / "concurrency_trace.jsonl").read_text().splitlines()[:6]  # two requests running
    trace = tmp_path / "ok.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    assert main(["check", str(trace), *ARGS, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tables"]["holds"] and doc["tables"]["properties"] == {"TENANT_CONCURRENCY": True}
    assert doc["tables"]["agree"]


def test_a_bad_property_file_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text(
        (EX / "tenant_concurrency.yaml").read_text().replace("running + 1 <= k", "running * running <= k")
    )
    args = [
        "check",
        str(EX / "run" / "concurrency_trace.jsonl"),
        "--contract",
        str(EX / "run" / "contract.yaml"),
    ]
    assert main([*args, "--property", str(bad)]) == 2
    assert f"{bad}:12:" in capsys.readouterr().err
