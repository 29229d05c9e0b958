"""The pinned protocol: load accounting, contended arms redone, traces kept and re-judged, the corner cell."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from rvguard.check import check_trace
from rvguard.contract import load_contract
from rvguard.enforce.request import Request
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch
from rvguard.gateway.fake import FakeUpstream
from rvguard.sim.runner import Arm
from rvguard.study.live import LiveRunner, entitled_sides, slug
from rvguard.study.pinned import (
    CpuSample,
    PinnedRunner,
    contended,
    corner,
    cpu_sample,
    group_pids,
    machine_load,
)

from ..sim._common import MARQUEE


def test_machine_load_splits_own_from_foreign_cpu() -> None:
    before = CpuSample(t=0.0, busy=0, own=0, load1=0.5)
    after = CpuSample(t=10.0, busy=1800, own=1500, load1=2.4)  # 100 ticks/s: 1.8 cores busy, 1.5 ours
    load = machine_load(before, after, hz=100.0)
    assert load["own_cpu"] == 1.5 and load["foreign_cpu"] == 0.3
    assert load["excess_load"] == round(2.4 - 1.5, 3)
    assert contended(load, threshold=1.5, foreign=0.25)  # the others' 0.3 cores
    assert not contended(load, threshold=1.5, foreign=0.5)
    busy = machine_load(before, CpuSample(10.0, 1500, 1500, 4.0), hz=100.0)
    assert busy["foreign_cpu"] == 0.0 and contended(busy, threshold=1.5, foreign=0.5)  # load 4 with 1.5 ours


def test_by_default_only_the_others_cpu_marks_an_arm_contended() -> None:
    # the first protocol runs' flood arms: load 2.9 with 1.17 cores ours, the others 0.06 of a core
    before = CpuSample(t=0.0, busy=0, own=0, load1=1.8)
    ours = machine_load(before, CpuSample(10.0, 1230, 1170, 2.9), hz=100.0)
    assert ours["excess_load"] > 1.5 and ours["foreign_cpu"] == 0.6 / 10
    assert not contended(ours)  # our own runnable threads are no contention
    assert contended(ours, threshold=1.5)  # unless the load rule is asked for
    theirs = machine_load(before, CpuSample(10.0, 1470, 1170, 2.9), hz=100.0)  # others 0.3 cores
    assert contended(theirs)


def test_cpu_sample_reads_this_machine() -> None:
    assert os.getpid() in group_pids(os.getpgid(0))
    a = cpu_sample([os.getpid()])
    sum(i * i for i in range(200_000))  # some CPU of our own
    b = cpu_sample([os.getpid()])
    assert b.t > a.t and b.own >= a.own and b.busy >= a.busy and a.load1 >= 0.0


def _burst(arm: Arm, seed: int, rep: int) -> list[Request]:
    """8 assured (B = 6 entitled in one window) and 4 opportunistic, 2 tokens each."""
    return [
        Request(f"r{i}", "assured" if i < 8 else "opportunistic", 0.01 * i, max_tokens=2) for i in range(12)
    ]


async def test_a_contended_arm_is_redone_and_its_traces_rejudge(tmp_path: Path) -> None:
    # attempt 1: the others take 0.5 of a core (contended); attempt 2: only our own CPU (quiet)
    quiet = CpuSample(2.0, 150, 100, 0.1)
    samples = iter(
        [CpuSample(0.0, 0, 0, 0.1), CpuSample(1.0, 150, 100, 1.6), quiet, CpuSample(3.0, 250, 200, 0.2)]
    )
    measured: list[float] = []

    def sample() -> CpuSample:
        return next(samples)

    async def capacity() -> float:
        measured.append(9.6)
        return 9.6

    async with FakeUpstream(slots=4, token_delay=0.002) as up:
        live = LiveRunner(up.url, model=up.model, scale=1.0, tokens=16, traces=tmp_path)
        seen: list[object] = []
        guard_only = lambda a: a.params["arm"] == "guard"  # noqa: E731
        runner = PinnedRunner(live, capacity=capacity, sample=sample, keep=guard_only, finished=seen.append)
        arms = [
            Arm({"arm": "guard"}, MARQUEE, {"mode": "guarded", "learner": "admit-all"}),
            Arm({"arm": "unguarded"}, MARQUEE, {"mode": "unguarded", "learner": "admit-all"}),
        ]
        [cond] = await runner.arun(arms, reps=1, seed=0, arrivals=_burst)
    assert len(measured) == 2  # k measured before each attempt
    assert seen == [cond]  # told as the arm ended
    info = cond.to_dict()
    assert info["attempts"] == 2 and info["contended"] is False
    assert [a["contended"] for a in info["attempt_loads"]] == [True, False]
    assert info["path_capacity"] == 9.6 and 0.9 < info["time_scale"] < 1.1  # 4 / 9.6 over the study's ≈ 0.417
    assert info["preconditions"] in ("held", "broken") and "entitled_trace_miss" in info
    stem = tmp_path / f"{slug({'arm': 'guard'})}-rep0"
    raw = tmp_path / "trace.jsonl"
    raw.write_bytes(gzip.decompress(Path(f"{stem}.jsonl.gz").read_bytes()))
    report = check_trace(str(raw), load_contract(f"{stem}.contract.json"))
    assert sum(1 for v in report.violations if v.property == "SF") == info["sf_violations"]
    assert sum(1 for v in report.violations if v.property == "AF") == info["af_violations"] == 0


def test_entitled_sides_counts_both_clocks() -> None:
    events = [
        Arrive(0.0, "a", "assured", extra={"arrival_gap": 0.004}),
        Arrive(0.1, "b", "assured"),
        Arrive(0.2, "c", "opportunistic"),
        Admit(0.0, "a", Basis.FLOOR),
        Admit(0.1, "b", Basis.FLOOR),
        Admit(0.2, "c", Basis.SURPLUS),
        Dispatch(0.0, "a"),
        Dispatch(0.1, "b"),
        Complete(1.0, "a"),
        Complete(2.1, "b"),  # D = 1.82: late on the trace's clock
    ]
    client = {"a": (200, 1.9), "b": (200, 2.0), "c": (200, 0.1)}  # a: late only on the client's clock
    sides = entitled_sides(MARQUEE, events, client)
    assert sides == {"entitled": 2, "trace_late": 1, "client_late": 2, "arrival_gap_max": 0.004}
    assert entitled_sides(MARQUEE, events, {})["client_late"] == 2  # no answer seen: a client miss


def test_corner_is_b_equals_c_and_holds_on_the_simulator() -> None:
    doc = corner(MARQUEE, reps=2, seed=0).to_dict()
    assert doc["experiment"] == "corner"
    guarded = [c for c in doc["conditions"] if c["params"]["guard"]]
    assert {c["params"]["floor"] for c in doc["conditions"]} == {MARQUEE.slots}
    assert len(guarded) == 2 and len(doc["conditions"]) == 3
    for c in guarded:
        assert c["rho_eff"] <= 0.7 and c["preconditions"] == "held"
        assert c["assured_miss"] == 0.0 and c["af_violations"] == 0
    [unguarded] = [c for c in doc["conditions"] if not c["params"]["guard"]]
    assert unguarded["assured_miss"] > 0.1  # the flood, handed to the engine in arrival order
