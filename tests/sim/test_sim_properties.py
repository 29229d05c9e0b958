"""The simulator takes a user's property tables (`run_once(properties=...)`, ``rvguard simulate
--property FILE [--shadow]``): the same gate as the Guard's runs in the simulated core. On the
marquee workload each table is broken with the gate off (the monitor catches it) and never broken
by the enforced trace: every break left is one a built-in guarantee caused, declared by the
trace's ``shield`` record. In shadow the core decides alone: the table breaks, and each break is
alerted."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.contract import load_contract
from rvguard.events import Watch
from rvguard.properties import PropertyTable, TableMonitor
from rvguard.properties.load import load_properties
from rvguard.sim.run import run_once
from rvguard.sim.workloads import poisson

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "marquee.yaml"
CONTRACT = load_contract(SPEC)
(CONCURRENCY,) = load_properties(ROOT / "examples" / "properties" / "tenant_concurrency.yaml")
(RUNNING,) = load_properties(ROOT / "tests" / "properties" / "running_limit.yaml")  # a dispatch table: delay
TABLES = {t.name: t for t in (CONCURRENCY, RUNNING)}


def _arrivals(seed: int) -> list:
    return poisson(CONTRACT, random.Random(f"arrivals:{seed}"), assured_rate=6.0, opp_rate=12.0, duration=3.0)


def _conceded(events: tuple) -> set[tuple[float, str, str]]:
    """(t, table, rid) of each shield record naming a built-in guarantee that went first."""
    return {
        (ev.t, ev.extra["property"], ev.extra["request"])
        for ev in events
        if isinstance(ev, Watch) and ev.condition == "shield" and ev.extra.get("first") in ("AF", "SF")
    }


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_gate_keeps_the_table_the_workload_breaks(name: str, seed: int) -> None:
    table: PropertyTable = TABLES[name]
    bare = run_once(CONTRACT, _arrivals(seed), seed=seed)
    broken = TableMonitor(CONTRACT, [table]).feed_all(bare.result.events)
    assert len(broken) >= 3  # the workload breaks it with the gate off

    out = run_once(CONTRACT, _arrivals(seed), seed=seed, properties=[table])
    assert out.tables is not None and out.tables.violations == [] and out.tables.agree
    conceded = _conceded(out.result.events)
    found = TableMonitor(CONTRACT, [table]).feed_all(out.result.events)  # judged apart from the report
    assert {(v.t, v.property, v.rid) for v in found} <= conceded
    assert len(out.tables.declared) == len(found)
    assert out.violations == ()  # the built-in properties still hold
    refused = [ev for ev in out.result.events if getattr(ev, "reason", "") == f"property: {name}"]
    assert bool(refused) is (
        name == "TENANT_CONCURRENCY"
    )  # an admission table refuses; a dispatch one delays
    dispatched = [(ev.t, ev.rid) for ev in out.result.events if ev.kind.value == "dispatch"]
    assert dispatched != [(ev.t, ev.rid) for ev in bare.result.events if ev.kind.value == "dispatch"]


def test_in_shadow_the_table_breaks_and_each_break_is_alerted() -> None:
    out = run_once(CONTRACT, _arrivals(0), seed=0, properties=[CONCURRENCY], shadow=True)
    assert out.tables is not None and len(out.tables.violations) >= 3
    alerted = {
        (ev.t, ev.extra["request"])
        for ev in out.result.events
        if isinstance(ev, Watch) and ev.condition == "shield"
    }
    assert {(v.t, v.rid) for v in out.tables.violations} <= alerted
    assert not any(getattr(ev, "reason", "").startswith("property: ") for ev in out.result.events)


def test_simulate_property_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "run.jsonl"
    prop = str(ROOT / "examples" / "properties" / "tenant_concurrency.yaml")
    args = ["simulate", str(SPEC), "--duration", "3", "--out", str(trace), "--property", prop]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "property tables (enforced)" in out and "property TENANT_CONCURRENCY: holds" in out
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert any(r.get("reason") == "property: TENANT_CONCURRENCY" for r in records)
    assert main(["check", str(trace), "--contract", str(SPEC), "--property", prop]) in (0, 3)

    assert main([*args, "--shadow"]) == 0
    assert "property tables (in shadow)" in capsys.readouterr().out
    assert main(["check", str(trace), "--contract", str(SPEC), "--property", prop]) == 1


@pytest.mark.parametrize(
    "extra", [["--shadow"], ["--property", "x.yaml", "--kv-capacity", "4096"]], ids=["shadow-alone", "kv"]
)
def test_simulate_property_misuse_is_bad_input(tmp_path: Path, extra: list[str]) -> None:
    args = ["simulate", str(SPEC), "--out", str(tmp_path / "t.jsonl"), *extra]
    assert main(args) == 2
