"""``rvguard screen``: exit codes, the label on every output, rate and sample parsing."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist

import pytest

from rvguard.cli import main
from rvguard.contract import load_contract
from rvguard.errors import SpecError
from rvguard.screen import LABEL, ServiceDistribution
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
    binary = tmp_path / "svc.bin"
    binary.write_bytes(bytes(range(128, 256)))  # issue 10 item 6: was a UnicodeDecodeError traceback
    assert main(["screen", SPEC, "--rate", "assured=1", "--service-sample", str(binary)]) == 2


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


def test_service_percentiles_stand_in_for_a_sample(capsys: pytest.CaptureFixture[str]) -> None:
    """A lognormal through p50 and p99: the screen runs on it and says the shape was assumed."""
    svc = ServiceDistribution.lognormal_through(0.4, 0.66)
    assert svc.percentile(50) == pytest.approx(0.4, rel=1e-3)
    assert svc.percentile(99) == pytest.approx(0.66, rel=1e-3)
    sigma = math.log(0.66 / 0.4) / NormalDist().inv_cdf(0.99)
    assert svc.scv == pytest.approx(math.exp(sigma**2) - 1, rel=0.02)
    code = main(
        ["screen", SPEC, "--rate", "assured=4", "--service-percentiles", "p50=0.4,p99=0.66", "--json"]
    )
    d = json.loads(capsys.readouterr().out)
    assert code == (0 if d["accept"] else 1) and d["label"] == LABEL
    assert any("lognormal through p50=0.4,p99=0.66" in n for n in d["notes"])


@pytest.mark.parametrize(
    "given", ["p50=0.4", "p50=0.7,p99=0.6", "p50=0.4,p75=0.5", "p50=x,p99=1", "p50=0,p99=1"]
)
def test_bad_service_percentiles_exit_2(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["screen", SPEC, "--rate", "assured=4", "--service-percentiles", given]) == 2
    assert "service-percentiles" in capsys.readouterr().err


def test_a_numbers_file_with_a_bad_token_names_line_and_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "svc.txt"
    p.write_text("0.4 0.5\n0.4 abc\n")
    assert main(["screen", SPEC, "--rate", "assured=4", "--service-sample", str(p)]) == 2
    assert f"{p}:2: not a number: 'abc'" in capsys.readouterr().err
