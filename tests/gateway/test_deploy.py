"""deploy/: the alerting rules pass promtool, and every series the rules and the dashboard use exists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rvguard.gateway.fake import FakeUpstream

from ._support import auth, contract, gateway, settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "rvguard-rules.yml"
_SERIES = re.compile(r"\brvguard_[a-z_]+")


def _exprs() -> list[str]:
    rules = yaml.safe_load(RULES.read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    dash = json.loads((DEPLOY / "grafana" / "rvguard-dashboard.json").read_text())
    exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    return exprs


async def test_every_series_the_rules_and_dashboard_use_is_exposed(tmp_path: Path) -> None:
    async with (
        FakeUpstream() as up,
        gateway(contract(), settings(up.url, tmp_path / "t.jsonl")) as (_gw, url),
        httpx.AsyncClient() as client,
    ):
        await client.post(
            url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, headers=auth("sk-assured")
        )
        text = (await client.get(url + "/metrics")).text
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    exposed = {  # every family is listed (HELP, TYPE) even before its first labelled sample
        fam.name + suffix for fam in text_string_to_metric_families(text) for suffix in suffixes[fam.type]
    }
    used = {name for expr in _exprs() for name in _SERIES.findall(expr)}
    assert used and used <= exposed, sorted(used - exposed)


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail(
            "promtool is missing: `make promtool` installs Debian's prometheus package", pytrace=False
        )
    return found


@pytest.mark.parametrize(
    "command", [["check", "rules", RULES.name], ["test", "rules", "rvguard-rules.test.yml"]]
)
def test_promtool_accepts_and_tests_the_rules(command: list[str]) -> None:
    done = subprocess.run(
        [_promtool(), *command], cwd=RULES.parent, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
