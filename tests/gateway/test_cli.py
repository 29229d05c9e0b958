"""``rvguard serve`` and ``rvguard calibrate`` from the command line."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path

import httpx
import pytest
import yaml

from rvguard.check import check_trace
from rvguard.cli import build_parser, main
from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, contract_data, read_trace, serve_process


def test_subcommands_are_registered() -> None:
    p = build_parser()
    a = p.parse_args(["serve", "spec.yaml", "--upstream", "http://127.0.0.1:1", "--port", "9"])
    assert (a.command, a.spec, a.port, a.host) == ("serve", "spec.yaml", 9, "127.0.0.1") and callable(a.run)
    b = p.parse_args(["calibrate", "--upstream", "http://127.0.0.1:1", "--slots", "8"])
    assert (b.command, b.slots, b.lengths) == ("calibrate", 8, "1,8,16,32")


def test_serve_with_a_bad_contract_exits_2(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("slots: -1\n")
    assert main(["serve", str(spec), "--upstream", "http://127.0.0.1:1"]) == 2


def test_serve_on_a_port_in_use_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(contract_data(contract())))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert main(["serve", str(spec), "--upstream", "http://127.0.0.1:1", "--port", port]) == 2
    assert f"could not serve on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--upstream", "notaurl"], "upstream"),
        (["--upstream", "ftp://127.0.0.1:1"], "upstream"),
        (["--upstream", "http://127.0.0.1:99999"], "upstream"),
        (["--upstream", "http://127.0.0.1:1", "--timeout", "-1"], "timeout"),
        (["--upstream", "http://127.0.0.1:1", "--read-timeout", "nan"], "read_timeout"),
        (["--upstream", "http://127.0.0.1:1", "--port", "99999"], "--port"),
        (["--upstream", "http://127.0.0.1:1", "--learner-timeout", "0"], "learner_timeout"),
        (["--upstream", "http://127.0.0.1:1", "--learner-timeout", "inf"], "learner_timeout"),
    ],
)
def test_serve_refuses_bad_settings_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    """Started anyway, each would turn every request, entitled ones too, into a fail."""
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(contract_data(contract())))
    assert main(["serve", str(spec), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rvguard serve: error: ") and named in err and "Traceback" not in err


def test_calibrate_cli_bad_lengths_and_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--upstream", "http://127.0.0.1:1", "--lengths", "a,b"]) == 2
    assert main(["calibrate", "--upstream", "http://127.0.0.1:1", "--lengths", "1", "--reps", "1"]) == 2
    assert "cannot reach" in capsys.readouterr().err


async def test_serve_process_end_to_end_with_the_fake(tmp_path: Path) -> None:
    c = contract()
    async with FakeUpstream(token_delay=0.001) as up:
        with serve_process(c, up.url, tmp_path, "--learner", "reject-all") as (url, trace):
            async with httpx.AsyncClient(timeout=10.0) as client:
                ok = await client.post(
                    url + "/v1/completions", json={"prompt": "x", "max_tokens": 3}, headers=auth("sk-assured")
                )
                no = await client.post(
                    url + "/v1/completions", json={"prompt": "x"}, headers={"x-tenant": "assured"}
                )
                health = await client.get(url + "/healthz")
            await asyncio.sleep(0.05)
    assert ok.status_code == 200 and no.status_code == 401 and health.json()["status"] == "ok"
    events = read_trace(trace)
    assert [e["tenant"] for e in events if e["kind"] == "arrive"] == ["assured"]
    assert check_trace(str(trace), c, properties=["AF", "DR", "WF"]).violations == []


def test_calibrate_cli_writes_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "env.yaml"

    async def run() -> int:
        async with FakeUpstream(slots=2) as up:
            return await asyncio.to_thread(
                main,
                [
                    "calibrate",
                    "--upstream",
                    up.url,
                    "--slots",
                    "2",
                    "--lengths",
                    "1,4",
                    "--reps",
                    "1",
                    "--out",
                    str(out),
                    "--json",
                ],
            )

    assert asyncio.run(run()) == 0
    assert "s_max:" in out.read_text() and '"service"' in capsys.readouterr().out


def test_serve_logs_json_lines_and_refuses_an_unset_key_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--upstream-key-env`` names a variable that must be set; the log is one JSON object a line."""
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(contract_data(contract())))
    monkeypatch.delenv("RVGUARD_TEST_NO_SUCH_KEY", raising=False)
    args = ["serve", str(spec), "--upstream", "http://127.0.0.1:1", "--log-format", "json"]
    assert main([*args, "--upstream-key-env", "RVGUARD_TEST_NO_SUCH_KEY"]) == 2
    assert "RVGUARD_TEST_NO_SUCH_KEY is not set" in capsys.readouterr().err
    logging.getLogger("rvguard.gateway").warning("probe line", extra={"event": "x", "request_id": "r1"})
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert json.loads(line)["request_id"] == "r1"
