"""The reserve-sweep experiment: the trade's shape, not its numbers.

As R grows from 0 to C the assured miss falls (non-increasing in trend: a step may rise by
sampling noise, by at most `NOISE`) and the surplus throughput does not rise (within a
tolerance of `NOISE` of its R = 0 value), reaching 0 at R = C; the trade is real (the miss at
R = 0 is above the miss at R = C on the Poisson floor), and no arm violates RB, AF, DR or WF.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.sim.catalog import EXPERIMENTS
from rvguard.sim.experiments import ExperimentResult
from rvguard.sim.experiments_reserve import reserve_sweep
from rvguard.sim.loads import MARQUEE_CONTRACT

NOISE = 0.05


@pytest.fixture(scope="module")
def result() -> ExperimentResult:
    return reserve_sweep(MARQUEE_CONTRACT, reps=2, seed=0)


def _by_stream(result: ExperimentResult, key: str) -> dict[str, list[float]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for c in result.conditions:
        d = c.to_dict()
        out.setdefault(c.params["assured"], []).append((c.params["reserve"], d[key]))
    return {s: [v for _, v in sorted(pts)] for s, pts in out.items()}


def test_one_arm_per_reserve_and_stream(result: ExperimentResult) -> None:
    assert sorted((c.params["assured"], c.params["reserve"]) for c in result.conditions) == [
        (s, r) for s in ("paced", "poisson") for r in range(MARQUEE_CONTRACT.slots + 1)
    ]
    assert EXPERIMENTS["reserve-sweep"] is reserve_sweep


def test_assured_miss_is_non_increasing_in_trend(result: ExperimentResult) -> None:
    for stream, miss in _by_stream(result, "assured_miss").items():
        assert miss[-1] <= miss[0], stream
        assert all(b <= a + NOISE for a, b in itertools.pairwise(miss)), (stream, miss)
    poisson = _by_stream(result, "assured_miss")["poisson"]
    assert poisson[0] > poisson[-1]  # the reserve buys something on this load


def test_surplus_throughput_does_not_rise_and_ends_at_zero(result: ExperimentResult) -> None:
    for stream, tp in _by_stream(result, "surplus_throughput").items():
        assert tp[0] > 0 and tp[-1] == 0, stream
        assert all(b <= a + NOISE * tp[0] for a, b in itertools.pairwise(tp)), (stream, tp)
        assert tp[-2] < tp[0], stream  # reserving all but one slot costs surplus work


def test_no_arm_violates_rb_af_dr_or_wf(result: ExperimentResult) -> None:
    for c in result.conditions:
        d = c.to_dict()
        assert (d["rb_violations"], d["af_violations"], d["dr_wf_violations"]) == (0, 0, 0), c.params


def test_the_command_prints_json_and_writes_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["experiment", "reserve-sweep", "--reps", "1", "--out", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["experiment"] == "reserve-sweep" and len(doc["conditions"]) == 10
    assert {"assured_miss", "assured_miss_ci", "surplus_throughput"} <= set(doc["conditions"][0])
    assert Path(doc["plot"]).is_file()
