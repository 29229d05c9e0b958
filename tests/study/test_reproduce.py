"""The reproduction table: rows from documents, verdicts from shapes, the engine column from recorded runs."""

from __future__ import annotations

import json
from pathlib import Path

from rvguard.sim.experiments import fifo_ablation
from rvguard.study.claims import CLAIMS, Claim
from rvguard.study.reproduce import _load_engine, _verdict, counts, held, render

from ..sim._common import MARQUEE


def test_verdicts_follow_the_shapes() -> None:
    claim = Claim("s", "t", "1", "e", lambda d: ("—", None), why="because")
    assert _verdict(claim, True, None) == ("reproduced in shape", "because")
    assert _verdict(claim, True, True)[0] == "reproduced in shape; engine agrees"
    assert _verdict(claim, True, False)[0] == "reproduced in shape; on the engine differs"
    assert _verdict(claim, "partly", None)[0] == "partly reproduced"
    assert _verdict(claim, False, None)[0] == "differs"
    assert _verdict(claim, None, None)[0] == "not reproduced"


def test_render_has_a_row_per_claim_and_the_engine_column(tmp_path: Path) -> None:
    doc = fifo_ablation(MARQUEE, reps=1, seed=0).to_dict()
    engine = dict(doc)
    engine["conditions"] = [{**c, "time_scale": 1.5, "backend": "http://engine"} for c in doc["conditions"]]
    engine["protocol"] = {"engine_cpu": 1}
    (tmp_path / "fifo-ablation.json").write_text(json.dumps(engine))
    (tmp_path / "calibrate.json").write_text(json.dumps({"slots": 4}))  # not an experiment: ignored
    loaded = _load_engine(tmp_path)
    assert set(loaded) == {"fifo-ablation"}
    table = render({"fifo-ablation": doc}, loaded, reps=1, seed=0)
    rows = [line for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == len(CLAIMS)
    fifo = next(r for r in rows if "FIFO dispatch" in r)
    cells = [c.strip() for c in fifo.split("|")]
    assert cells[5].startswith("ρ̂") and cells[6].startswith("ρ̂")  # simulator and engine both answered
    assert "## Engine runs" in table and "| fifo-ablation | dispatch=priority opp_rate=5.0" in table
    assert _load_engine(tmp_path / "missing") == {}


def test_sim_results_re_render_without_rerunning(tmp_path: Path) -> None:
    from rvguard.study.reproduce import reproduce

    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "fifo-ablation.json").write_text(json.dumps(fifo_ablation(MARQUEE, reps=1, seed=0).to_dict()))
    table = reproduce(tmp_path / "out", sim=saved).read_text()
    fifo = next(line for line in table.splitlines() if "FIFO dispatch" in line)
    assert "reproduced in shape" in fifo
    beta = next(line for line in table.splitlines() if "guarded assured miss at every β" in line)
    assert "not reproduced" in beta  # no beta-sweep document was saved, and none was run


def _condition(guard: bool, preconditions: str, **more: object) -> dict[str, object]:
    params = {"guard": guard, **more.pop("params", {})}  # type: ignore[dict-item]
    return {"params": params, "preconditions": preconditions, **more}


def test_engine_verdicts_use_held_guarded_conditions_and_uncontended_runs() -> None:
    assert counts(_condition(True, "held"))
    assert not counts(_condition(True, "broken"))  # the guard's, preconditions broken: the watch's case
    assert not counts({"params": {"guard": True}})  # unlabelled: not evidence either way
    assert counts(_condition(False, "broken"))  # a baseline: the guard claims nothing of its misses
    assert counts(_condition(True, "broken", params={"dispatch": "fifo"}))  # the FIFO ablation's baseline
    assert not counts(_condition(False, "held", contended=True))  # run on a loaded machine
    docs = {
        "fifo-ablation": {
            "protocol": {},
            "conditions": [_condition(True, "broken"), _condition(False, "held")],
        },
        "beta-sweep": {"conditions": [_condition(True, "held")]},  # before the protocol: not used
    }
    kept = held(docs)
    assert set(kept) == {"fifo-ablation"} and len(kept["fifo-ablation"]["conditions"]) == 1


def test_engine_section_labels_conditions_and_a_claim_left_without_held_ones(tmp_path: Path) -> None:
    doc = fifo_ablation(MARQUEE, reps=1, seed=0).to_dict()
    broken = {"preconditions": "broken", "precondition_breaks": {"service-high": 3}}
    load = {"loadavg_1m_before": 0.4, "loadavg_1m_after": 1.9, "own_cpu": 1.6, "contended": False}
    engine = {
        "experiment": "fifo-ablation",
        "protocol": {"engine_cpu": 1},
        "conditions": [{**c, **broken, **load} for c in doc["conditions"]],
    }
    table = render({"fifo-ablation": doc}, {"fifo-ablation": engine}, reps=1, seed=0)
    fifo = next(line for line in table.splitlines() if "FIFO dispatch" in line)
    assert "— (no held condition)" in fifo  # every priority arm broke: the engine answers nothing
    assert "broken (service-high 3)" in table and "0.4→1.9 (own 1.6)" in table
    assert "6 conditions: 0 held, 6 broken, 0 contended; 1-minute load 0.4 to 1.9" in table
