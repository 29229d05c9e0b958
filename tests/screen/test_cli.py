"""``rvguard screen``: exit codes, the label on every output, rate and sample parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.contract import load_contract
from rvguard.errors import SpecError
from rvguard.screen import LABEL
from rvguard.screen.cli import parse_rates, read_service_sample

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "marquee.yaml")


@pytest.fixture
def sample(tmp_path: Path) -> str:
    p = tmp_path / "svc.txt"
    p.write_text("# services (s)\n0.40, 0.41 0.42\n0.43\n0.45\n")
    return str(p)


def test_accept_and_reject_exit_codes(sample: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["screen", SPEC, "--rate", "assured=4", "--service-sample", sample]) == 0
    out = capsys.readouterr().out
    assert f"verdict: accept ({LABEL})" in out
    assert main(["screen", SPEC, "--rate", "assured=6", "--rate", "opportunistic=40", "--policy", "fifo",
                 "--service-sample", sample]) == 1  # fmt: skip
    assert f"verdict: reject ({LABEL})" in capsys.readouterr().out


def test_json_carries_the_label(sample: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["screen", SPEC, "--rate", "20", "--service-sample", sample, "--percentile", "p50", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert d["label"] == LABEL
    assert code == (0 if d["accept"] else 1)
    assert d["percentile"] == "p50"
    assert d["tenants"][0]["offered_rate"] == 6.0


def test_deadline_override(sample: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["screen", SPEC, "--rate", "assured=4", "--service-sample", sample, "--deadline", "0.1"]) == 1
    assert "D = 0.1 s" in capsys.readouterr().out


def test_bad_input_exits_2(sample: str, tmp_path: Path) -> None:
    assert main(["screen", SPEC, "--rate", "nobody=1", "--service-sample", sample]) == 2
    assert main(["screen", SPEC, "--rate", "assured=x", "--service-sample", sample]) == 2
    assert main(["screen", SPEC, "--rate", "assured=1", "--service-sample", str(tmp_path / "none")]) == 2
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    assert main(["screen", SPEC, "--rate", "assured=1", "--service-sample", str(empty)]) == 2
    assert (
        main(["screen", SPEC, "--rate", "assured=1", "--service-sample", sample, "--percentile", "p0"]) == 2
    )


def test_parse_rates() -> None:
    c = load_contract(SPEC)
    assert parse_rates(["20"], c) == {"assured": 6.0, "opportunistic": 14.0}
    assert parse_rates(["assured=2", "assured=1"], c) == {"assured": 3.0}
    with pytest.raises(SpecError, match="TENANT=R"):
        parse_rates(["=3", "a=1"], c)


def test_service_sample_from_a_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    rows = [
        {"t": 0.0, "kind": "arrive", "rid": "a", "tenant": "assured"},
        {"t": 0.0, "kind": "admit", "rid": "a", "basis": "floor"},
        {"t": 0.1, "kind": "dispatch", "rid": "a"},
        {"t": 0.5, "kind": "complete", "rid": "a"},
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = read_service_sample(str(trace))
    assert s.sample.tolist() == pytest.approx([0.4])
