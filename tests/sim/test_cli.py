"""``rvguard simulate | experiment | demo`` end to end through the main CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.data import TRACES
from rvguard.sim.catalog import EXPERIMENTS as CATALOG

SPEC = Path(__file__).resolve().parents[2] / "specs" / "marquee.yaml"


def test_simulate_writes_a_trace_check_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert (
        main(["simulate", str(SPEC), "--duration", "4", "--learner", "lsq", "--seed", "3", "--out", str(out)])
        == 0
    )
    assert out.stat().st_size > 0
    capsys.readouterr()
    assert main(["check", str(out), "--contract", str(SPEC), "--properties", "AF,DR,WF", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["violations"] == []


def test_simulate_unguarded_trace_violates_af(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    args = [
        "simulate",
        str(SPEC),
        "--duration",
        "3",
        "--learner",
        "reject-all",
        "--no-guard",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert main(["check", str(out), "--contract", str(SPEC), "--properties", "AF"]) == 1


def test_simulate_bad_workload_is_input_error(tmp_path: Path) -> None:
    assert main(["simulate", str(SPEC), "--workload", "nope", "--out", str(tmp_path / "t.jsonl")]) == 2


def test_experiment_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "beta-sweep", "--reps", "1", "--out", str(tmp_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["experiment"] == "beta-sweep"
    keys = {"params", "reps", "assured_miss", "assured_miss_ci", "offered_unmet", "offered_unmet_ci"}
    keys |= {"floor_attainment", "floor_attainment_ci", "rho_eff"}
    assert all(keys <= set(c) for c in d["conditions"])
    assert d["learner_fit"]["samples"] == 132
    assert (tmp_path / "beta-sweep.png").stat().st_size > 0


def test_demo_prints_the_honest_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--reps", "1", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "guarded, every β, both learners: assured miss max 0.000;" in text
    assert "assured rejected a run: paced 0.0," in text
    assert "unguarded LSQ (sheddable-only, paced): β=0 " in text and "the study: 0.86–0.94" in text
    assert "unguarded class-agnostic: β=0 miss" in text
    assert str(tmp_path / "beta-sweep.png") in text


def test_experiment_on_another_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "experiment",
        "fifo-ablation",
        "--reps",
        "1",
        "--profile",
        "vllm-cpu",
        "--out",
        str(tmp_path),
        "--json",
    ]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    # the CPU engine's service is a fifth of the V100's: the marquee load no longer overloads it
    assert all(c["assured_miss"] == 0.0 for c in d["conditions"])


def test_reproduce_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import rvguard.study.reproduce as rep
    from rvguard.sim.experiments import fifo_ablation

    monkeypatch.setattr(rep, "EXPERIMENTS", {"fifo-ablation": fifo_ablation})
    monkeypatch.setattr(
        rep, "_calibration_doc", lambda model: {"experiment": "calibration", "measured": {}, "targets": {}}
    )
    monkeypatch.setattr(rep, "_screen_doc", lambda quick, seed: {"experiment": "screen-eval", "summary": []})
    assert main(["experiment", "reproduce", "--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "reproduction.md").read_text()
    fifo = next(line for line in table.splitlines() if "same admission, FIFO dispatch" in line)
    assert "FIFO" in fifo and "reproduced in shape" in fifo
    assert (tmp_path / "sim" / "fifo-ablation.json").is_file()


# --- tenants named by the contract, not by the reference study ---

TWO = SPEC.parent / "two_tenants.yaml"
AZURE = TRACES / "azure_code_slice.csv"


@pytest.mark.parametrize("workload", ["poisson", "bursty", "azure"])
def test_simulate_a_contract_with_other_tenant_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workload: str
) -> None:
    out = tmp_path / "t.jsonl"
    load = str(AZURE) if workload == "azure" else workload
    assert main(["simulate", str(TWO), "--workload", load, "--duration", "30", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["check", str(out), "--contract", str(TWO), "--properties", "AF,DR,WF", "--json"]) == 0
    tenants = {json.loads(line)["tenant"] for line in out.read_text().splitlines() if '"arrive"' in line}
    assert tenants <= {"gold", "silver", "opportunistic"} and {"gold", "silver"} <= tenants


EXPERIMENTS = sorted(CATALOG)  # every registered experiment (test_catalog pins the names)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_runs_on_a_contract_with_other_tenant_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert (
        main(["experiment", name, "--spec", str(TWO), "--reps", "1", "--out", str(tmp_path), "--json"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["conditions"] and all(c["reps"] == 1 for c in doc["conditions"])
    # the guard never violates AF, DR or WF (the watch's floor-lowered rejects are AF by design)
    guarded = [
        c for c in doc["conditions"] if c["params"].get("guard") and c["params"].get("floor") != "watch"
    ]
    assert all(c["af_violations"] == 0 and c["dr_wf_violations"] == 0 for c in guarded)


def _spec(tmp_path: Path, tenants: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(
        "window: 1.0\nslots: 4\nservice: {s_max: 0.66, s_max_opp: 0.66, lower: 0.236}\ntenants:\n" + tenants
    )
    return str(path)


@pytest.mark.parametrize(
    ("tenants", "needs"),
    [
        ("  a: {floor: 2, deadline: 2.0, tier: 0}\n", "unfloored tenant"),
        ("  x: {floor: 0, deadline: 2.0, tier: 0}\n", "floored tenant"),
    ],
)
def test_an_experiment_refuses_a_contract_without_a_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tenants: str, needs: str
) -> None:
    assert (
        main(["experiment", "floor-sweep", "--spec", _spec(tmp_path, tenants), "--out", str(tmp_path)]) == 2
    )
    err = capsys.readouterr().err
    assert f"floor-sweep needs a{'n' if needs[0] == 'u' else ''} {needs}" in err and "Traceback" not in err


def test_simulate_refuses_a_rate_no_tenant_can_take(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, "  a: {floor: 2, deadline: 2.0, tier: 0}\n")
    assert main(["simulate", spec, "--rate", "5", "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "--rate 5 exceeds the floors' Σ B/W = 2 req/s" in capsys.readouterr().err
    assert main(["simulate", spec, "--rate", "2", "--out", str(tmp_path / "t.jsonl")]) == 0


# --- bad input exits 2 naming the option: no traceback, no hang, no silent empty run ---

BAD_SIMULATE = [
    (["--batch-cap", "0"], "--batch-cap"),
    (["--batch-cap", "-2"], "--batch-cap"),
    (["--learner", "lsq", "--beta", "-1"], "--beta"),
    (["--learner", "lsq", "--beta", "nan"], "--beta"),
    (["--learner", "lsq", "--beta", "inf"], "--beta"),
    (["--beta", "2"], "--beta applies only to --learner lsq"),
    (["--workload", "bursty", "--cv", "0"], "--cv"),
    (["--workload", "bursty", "--cv", "-1"], "--cv"),
    (["--workload", "bursty", "--cv", "nan"], "--cv"),
    (["--cv", "2"], "--cv applies only to --workload bursty"),
    (["--duration", "inf"], "--duration"),
    (["--duration", "nan"], "--duration"),
    (["--duration", "0"], "--duration"),
    (["--rate", "inf"], "--rate"),
    (["--rate", "nan"], "--rate"),
    (["--rate", "-3"], "--rate"),
    (["--rate", "1e9"], "--max-arrivals 10000000"),
    (["--duration", "1e12", "--rate", "1"], "--max-arrivals"),
    (["--max-arrivals", "0"], "--max-arrivals"),
    (["--no-guard", "--fifo"], "not allowed with"),
]


@pytest.mark.parametrize(("extra", "names"), BAD_SIMULATE)
def test_simulate_bad_option_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], names: str
) -> None:
    out = tmp_path / "t.jsonl"
    try:
        code = main(["simulate", str(SPEC), *extra, "--out", str(out)])
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2 and names in err and "Traceback" not in err
    assert not out.exists()


def test_simulate_max_arrivals_lets_a_large_run_through(tmp_path: Path) -> None:
    args = ["simulate", str(SPEC), "--rate", "1000", "--duration", "2", "--learner", "reject-all"]
    assert main([*args, "--max-arrivals", "1000", "--out", str(tmp_path / "a.jsonl")]) == 2
    assert main([*args, "--max-arrivals", "3000", "--out", str(tmp_path / "b.jsonl")]) == 0


@pytest.mark.parametrize("rows", [0, 1])
def test_simulate_replay_of_a_too_short_trace_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: int
) -> None:
    trace = tmp_path / "short.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "2023-11-16 18:17:03.9799600,4808,10\n" * rows
    )
    assert main(["simulate", str(SPEC), "--workload", str(trace), "--out", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "--workload" in err and "two arrivals" in err and "Traceback" not in err


BAD_EXPERIMENT = [
    (["screen-eval", "--folds", "0"], "--folds must be between 1 and --reps (10)"),
    (["screen-eval", "--folds", "-1"], "--folds"),
    (["screen-eval", "--folds", "5", "--reps", "2"], "--folds must be between 1 and --reps (2)"),
    (["screen-eval", "--spec", str(SPEC)], "unrecognized arguments: --spec"),
    (["beta-sweep", "--folds", "3"], "unrecognized arguments: --folds"),
    (["floor-sweep", "--grid", "small"], "unrecognized arguments: --grid"),
    (["beta-sweep", "--reps", "0"], "--reps"),
    (["stress", "--reps", "-1"], "--reps"),
    (["beta-sweep", "--engine-results", "."], "unrecognized arguments: --engine-results"),
    (["beta-sweep", "--quick"], "unrecognized arguments: --quick"),
    (["beta-sweep", "--calibration", "x.json"], "--calibration applies only with --backend"),
    (["beta-sweep", "--profile", "nope"], "--profile 'nope'"),
    (
        ["beta-sweep", "--backend", "http://127.0.0.1:9", "--profile", "vllm-cpu"],
        "--profile is the simulator",
    ),
    (["reproduce", "--spec", "x.yaml"], "unrecognized arguments: --spec"),
    (["reproduce", "--reps", "0"], "--reps must be at least 1"),
    (["reproduce", "--engine-results", "/nonexistent"], "not a directory"),
]


@pytest.mark.parametrize(("extra", "names"), BAD_EXPERIMENT)
def test_experiment_bad_option_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], names: str
) -> None:
    assert main(["experiment", *extra, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert names in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["experiment", "beta-sweep"], ["experiment", "screen-eval"], ["demo"]])
def test_out_that_is_a_file_exits_2_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    afile = tmp_path / "f"
    afile.write_text("")
    assert main([*command, "--out", str(afile)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--out" in err and "not a directory" in err


def test_demo_bad_reps_exits_2_before_it_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--reps", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--reps must be at least 1" in err


def test_table_names_what_the_violations_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "beta-sweep", "--reps", "1", "--out", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    agnostic = next(r for r in rows if "beta=1.0 guard=False learner=lsq-agnostic" in r)
    assert "AF-violations=" in agnostic and "DR/WF-violations=0" in agnostic
    assert "AF/DR/WF" not in "\n".join(rows)
    assert int(agnostic.split("AF-violations=")[1].split()[0]) > 0  # the baseline rejects entitled requests
