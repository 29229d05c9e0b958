"""Golden outputs: the CLI's traces and reports, byte for byte, pinned before a refactor.

Each case runs one CLI command in-process and compares its output with the
file under ``tests/goldens/``: the trace ``rvguard simulate`` writes, the
``--json`` report of ``rvguard check`` on that trace (with the phase sweep),
the ``--json`` output of a few quick experiments, and ``check --lenient`` on a
hand-written trace with bad lines of every sort (``messy.jsonl``). Refactors must leave
them byte-identical; a change that means to alter behaviour (the simulator's
model, a fixed verdict) regenerates them in a commit of its own, saying why:

    .venv/bin/python -m pytest tests/test_goldens.py --update-goldens

Volatile fields are taken out before comparing: the wall-clock ``seconds``
and the path-valued ``trace`` and ``plot``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rvguard.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = Path(__file__).resolve().parent / "goldens"
SPECS = {
    "marquee": ROOT / "specs" / "marquee.yaml",
    "two_tenants": ROOT / "specs" / "two_tenants.yaml",
    "tokens": GOLDENS / "tokens.yaml",
}

#: name -> (spec, simulate options); each trace is also checked (``check_<name>.json``)
SIMULATIONS: dict[str, tuple[str, list[str]]] = {
    "marquee_admit_all": ("marquee", ["--learner", "admit-all", "--seed", "0"]),
    "marquee_lsq_beta": ("marquee", ["--learner", "lsq", "--beta", "0.5", "--seed", "1", "--rate", "14"]),
    "marquee_unguarded": ("marquee", ["--no-guard", "--learner", "random", "--seed", "2"]),
    "marquee_bursty_fifo": ("marquee", ["--fifo", "--workload", "bursty", "--seed", "3", "--batch-cap", "2"]),
    "two_tenants_random": ("two_tenants", ["--learner", "random", "--seed", "4", "--rate", "24"]),
    "tokens_reject_all": ("tokens", ["--learner", "reject-all", "--seed", "5", "--rate", "20"]),
    "tokens_lsq": ("tokens", ["--learner", "lsq-agnostic", "--seed", "6", "--rate", "16"]),
}
#: check options per spec (ND needs the upper bound U)
CHECK_PROPERTIES = {"marquee": "AF,SF,DR,WF", "two_tenants": "AF,SF,DR,WF,ND", "tokens": "AF,SF,DR,WF,ND"}
#: name -> experiment options
EXPERIMENTS: dict[str, list[str]] = {
    "fifo-ablation": ["--reps", "2", "--seed", "1"],
    "capacity-drop": ["--reps", "1"],
    "gaie-fault": ["--reps", "1", "--seed", "2"],
    "floor-sweep": ["--reps", "1"],
}
DURATION = "3"


@pytest.fixture
def update(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def _compare(path: Path, data: bytes, update: bool) -> None:
    if update:
        path.write_bytes(data)
        return
    assert path.is_file(), f"no golden {path.name}: run pytest {Path(__file__).name} --update-goldens"
    assert data == path.read_bytes(), f"{path.name} differs from its golden (see this module's docstring)"


def _json(text: str, drop: tuple[str, ...]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(text)
    for key in drop:
        doc.pop(key, None)
    return doc


def _report_golden(argv: list[str], name: str, drop: tuple[str, ...], capsys: Any, update: bool) -> None:
    """Run ``argv``; its exit code and JSON output (less ``drop``) must match ``goldens/name``."""
    code = main(argv)
    doc = {"exit": code, "output": _json(capsys.readouterr().out, drop)}
    _compare(GOLDENS / name, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(), update)


def _simulate(name: str, tmp_path: Path) -> Path:
    spec, options = SIMULATIONS[name]
    out = tmp_path / f"sim_{name}.jsonl"
    argv = ["simulate", str(SPECS[spec]), "--duration", DURATION, *options, "--out", str(out)]
    assert main(argv) == 0
    return out


@pytest.mark.parametrize("name", sorted(SIMULATIONS))
def test_simulate_and_check_goldens(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], update: bool
) -> None:
    trace = _simulate(name, tmp_path)
    _compare(GOLDENS / trace.name, trace.read_bytes(), update)
    capsys.readouterr()
    spec = SIMULATIONS[name][0]
    argv = ["check", str(trace), "--contract", str(SPECS[spec]), "--json", "--phase-sweep", "4"]
    argv += ["--properties", CHECK_PROPERTIES[spec]]
    _report_golden(argv, f"check_{name}.json", ("trace", "seconds"), capsys, update)


def test_check_golden_of_a_messy_trace(capsys: pytest.CaptureFixture[str], update: bool) -> None:
    """Bad lines of every sort (``--lenient``) and a violation of each property."""
    argv = ["check", str(GOLDENS / "messy.jsonl"), "--contract", str(SPECS["marquee"])]
    argv += ["--json", "--lenient", "--phase-sweep", "3"]
    _report_golden(argv, "check_messy.json", ("trace", "seconds"), capsys, update)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiment_goldens(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], update: bool
) -> None:
    argv = ["experiment", name, *EXPERIMENTS[name], "--json", "--out", str(tmp_path)]
    _report_golden(argv, f"exp_{name}.json", ("plot",), capsys, update)
