"""``rvguard review TRACE [LOG] --contract SPEC``: exit codes, text and ``--json``, the alert log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.enforce.alertlog import AlertLog
from rvguard.enforce.watch import Alert
from rvguard.events import event_to_dict
from rvguard.review.alerts import count_alerts

from ._traces import ordered, served

CONTRACT = {
    "window": 1.0,
    "slots": 2,
    "service": {"s_max": 0.5, "s_max_opp": 0.6, "lower": 0.2},
    "tenants": {"assured": {"floor": 2, "deadline": 2.0}, "opp": {"floor": 0, "deadline": 2.0, "tier": 1}},
}


def _files(tmp_path: Path, events: list) -> tuple[str, str]:  # type: ignore[type-arg]
    trace, spec = tmp_path / "t.jsonl", tmp_path / "c.json"
    trace.write_text("".join(json.dumps(event_to_dict(ev)) + "\n" for ev in events))
    spec.write_text(json.dumps(CONTRACT))
    return str(trace), str(spec)


def test_a_clean_trace_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, spec = _files(tmp_path, served("a", 0.0, 0.3))
    assert main(["review", trace, "--contract", spec]) == 0
    assert "no fixed parameter proved wrong" in capsys.readouterr().out


def test_a_wrong_parameter_exits_1_with_the_finding_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, spec = _files(tmp_path, ordered(served("a", 0.0, 0.7), served("b", 0.0, 0.3)))
    assert main(["review", trace, "--contract", spec, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["holds"] is False and doc["requests"] == 2
    (f,) = doc["findings"]
    assert (
        f["parameter"] == "service.s_max"
        and f["occurrences"] == 1
        and f["recalibrate"] == {"service.s_max": 0.7}
    )


def test_the_alert_log_is_counted_beside_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, spec = _files(tmp_path, served("a", 0.0, 0.7))
    log = AlertLog(tmp_path / "alerts.jsonl")
    log(Alert(0.7, "service", "assured service 0.7s above ceiling", 0.7, 0.5))
    log(Alert(3.0, "clear", "assumptions hold again"))
    with open(log.path, "a") as f:
        f.write(json.dumps({"event": "startup", "kind": "service"}) + "\n\n")
    assert main(["review", trace, str(log.path), "--contract", spec, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["alerts"] == {"service": 1, "clear": 1, "other": 1} and doc["log"] == str(log.path)


def test_a_bad_alert_log_line_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, spec = _files(tmp_path, served("a", 0.0, 0.3))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t": 1, "kind": "service"}\n[1, 2]\n')
    assert main(["review", trace, str(bad), "--contract", spec]) == 2
    assert "2" in capsys.readouterr().err


def test_a_bad_trace_line_exits_2(tmp_path: Path) -> None:
    trace, spec = _files(tmp_path, served("a", 0.0, 0.3))
    with open(trace, "a") as f:
        f.write('{"t": "soon", "kind": "arrive", "rid": "x", "tenant": "assured"}\n')
    assert main(["review", trace, "--contract", spec]) == 2


def test_gateway_log_lines_count_only_when_they_are_alerts(tmp_path: Path) -> None:
    log = tmp_path / "gw.jsonl"
    lines = [
        {"event": "assumption_alert", "kind": "capacity"},
        {"event": "refused", "kind": "capacity"},
        {"kind": "x"},
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert count_alerts(log) == {"capacity": 1, "other": 2}


def test_the_contracts_headroom_block_reviews_the_redline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rvguard.events import Sample

    values = [0.6] * 5 + [0.0] + [0.6] * 5  # one glitch: at alpha 0.9 a false trigger
    events = [Sample(15.0 * i, "kv_cache", v, 15.0 * i) for i, v in enumerate(values)]
    trace, spec = _files(tmp_path, events)
    block = {"alpha": 0.9, "staleness": 30.0, "resources": {"kv_cache": {"h_min": 0.2, "margin": 0.05}}}
    Path(spec).write_text(json.dumps({**CONTRACT, "headroom": block}))
    assert main(["review", trace, "--contract", spec, "--json"]) == 1
    (f,) = json.loads(capsys.readouterr().out)["findings"]
    assert f["parameter"] == "headroom.alpha" and f["recalibrate"] == {"headroom.alpha": 0.65}
    assert main(["review", trace, "--contract", spec, "--confirm", "0"]) == 2
