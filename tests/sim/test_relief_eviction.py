"""The Guard's eviction channels in the simulator (issue 24, item 2): the emergency channel evicts by
the runbook's ranking, the voluntary one by the crossover, through the same core, and the traces
pass PR, EV, ER, RL and WF; ``rvguard experiment relief-eviction`` and ``simulate --relief``.

The oracles read the trace and the model's own physics (a request's S at time t is its prompt plus
``token_rate`` tokens a second since its ``dispatch``, up to its output), never the channels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rvguard.cli import main
from rvguard.events import Admit, Complete, Dispatch, Event, Evict, Fail
from rvguard.monitors import Monitor
from rvguard.sim.experiments_relief import DEFAULT_CONTRACT
from rvguard.sim.memory import PressureModel
from rvguard.sim.relief import default_prices, relief_contract, run_relief

MODEL = PressureModel(capacity=2000)  # 6 surplus clients of 200 + 120 tokens, one assured; 60 s
ASSURED = f"c{MODEL.clients}-"


def _violations(policy: str, events: tuple[Event, ...], contract: object = DEFAULT_CONTRACT) -> list[str]:
    judged = relief_contract(contract, policy=policy, model=MODEL)  # type: ignore[arg-type]
    mon = Monitor(judged, ("PR", "EV", "ER", "RL", "WF"))
    for ev in events:
        mon.feed(ev)
    return [f"{v.property} {v.rid}: {v.detail}" for v in mon.violations()]


def _state(t: float, dispatched: float) -> float:
    return MODEL.prompt_tokens + min(MODEL.output_tokens, MODEL.token_rate * (t - dispatched))


def _priced(fixed: float) -> object:
    block = relief_contract(DEFAULT_CONTRACT, policy="voluntary", model=MODEL).eviction
    assert block is not None
    return DEFAULT_CONTRACT.model_copy(
        update={"eviction": block.model_copy(update={"voluntary": default_prices(MODEL, fixed)})}
    )


def test_the_emergency_channel_evicts_the_largest_running_surplus_and_no_more() -> None:
    run = run_relief(DEFAULT_CONTRACT, MODEL, policy="emergency")
    bare = run_relief(DEFAULT_CONTRACT, MODEL, policy="preempt-all")
    running: dict[str, float] = {}
    floor = {e.rid for e in run.events if isinstance(e, Admit) and e.basis.value == "floor"}
    evictions = 0
    for i, ev in enumerate(run.events):
        if isinstance(ev, Dispatch):
            running[ev.rid] = ev.t
        elif isinstance(ev, Evict):
            evictions += 1
            assert ev.reason == "emergency" and ev.rid not in floor and not ev.rid.startswith(ASSURED)
            others = [_state(ev.t, t) for rid, t in running.items() if rid not in floor]
            assert ev.state >= max(others) - 1, (ev, others)  # the top of the ranking (to a token)
            nxt = run.events[i + 1]  # carried out in one step: the stop follows the evict at once
            assert isinstance(nxt, Fail) and (nxt.rid, nxt.t, nxt.reason) == (ev.rid, ev.t, "preempted")
        elif isinstance(ev, Fail | Complete):
            running.pop(ev.rid, None)
    assert evictions == run.evicted > 0
    assert run.preempted == run.evicted  # every stop is an eviction: nothing preempted bare
    assert run.evicted < bare.preempted / 4  # the fewest, where bare preemption stops them all
    assert run.completed >= 0.75 * run.sustainable > bare.completed
    assert _violations("emergency", run.events) == []


@pytest.mark.parametrize("share", [0.5, 0.95])
def test_the_voluntary_channel_evicts_only_past_the_crossover(share: float) -> None:
    fixed = share * MODEL.service
    run = run_relief(_priced(fixed), MODEL, policy="voluntary")  # type: ignore[arg-type]
    voluntary = [e for e in run.events if isinstance(e, Evict) and e.reason == "voluntary"]
    assert voluntary
    for ev in voluntary:  # keeping costs more than moving: remaining seconds x 1 > fixed
        remaining = (MODEL.output_tokens - (ev.state - MODEL.prompt_tokens)) / MODEL.token_rate
        assert remaining > fixed - 1e-9, (ev, remaining, fixed)
    assert _violations("voluntary", run.events, _priced(fixed)) == []


def test_no_voluntary_eviction_costs_more_than_a_whole_service() -> None:
    for share in (1.0, 1.25):
        run = run_relief(_priced(share * MODEL.service), MODEL, policy="voluntary")  # type: ignore[arg-type]
        assert not [e for e in run.events if isinstance(e, Evict) and e.reason == "voluntary"]
        assert run.evicted > 0  # the emergency channel still acts past the hard floor


def test_the_experiment_shows_the_ranking_and_the_crossover(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "relief-eviction", "--duration", "30", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["experiment"] == "relief-eviction"
    bare, emergency, *sweep = doc["conditions"]
    assert (bare["params"], emergency["params"]) == ({"policy": "preempt-all"}, {"policy": "emergency"})
    assert 0 < emergency["evicted_emergency"] == emergency["emergency_took_the_largest"] < bare["stopped"]
    assert emergency["surplus_completed"] > bare["surplus_completed"] == 0
    fixed = [c["params"]["fixed"] for c in sweep]
    counts = [c["evicted_voluntary"] for c in sweep]
    assert fixed == sorted(fixed) and counts == sorted(counts, reverse=True)
    for c in sweep:
        crossed = c["params"]["fixed"] >= c["params"]["service"]
        assert (c["evicted_voluntary"] == 0) == crossed, c
        if not crossed:
            assert c["least_remaining_evicted"] > c["params"]["fixed"] - 1e-6
    assert all(c["violations"] == 0 for c in doc["conditions"])


def test_simulate_evicts_and_check_judges_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``simulate --relief emergency`` from the CLI, then ``rvguard check`` on its trace against the
    contract with the blocks the run was given (the docs' recipe)."""
    spec = yaml.safe_load(Path("specs/marquee.yaml").read_text())
    spec["headroom"] = {
        "alpha": 0.5,
        "staleness": 5.0,
        "resources": {"kv_cache": {"h_min": 0.35, "margin": 0.1, "hard_floor": 0.15}},
    }
    spec["eviction"] = {"k": 2, "capacity": 800, "target": 0.35}
    contract = tmp_path / "c.yaml"
    contract.write_text(yaml.safe_dump(spec))
    out = tmp_path / "t.jsonl"
    argv = ["simulate", str(contract), "--kv-capacity", "800", "--duration", "30", "--relief", "emergency"]
    assert main([*argv, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "violated (PR/EV/RL/WF): none" in said and "(evicted 0)" not in said
    assert main(["check", str(out), "--contract", str(contract), "--properties", "PR,EV,ER,RL,WF,AF,DR"]) in (
        0,
        3,
    )
    report = capsys.readouterr().out
    for prop in ("PR", "EV", "ER", "RL", "WF"):
        assert any(line.split()[:3] == [prop, "holds", "so"] for line in report.splitlines()), report
