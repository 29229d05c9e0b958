"""`rvguard check --workers/--scheduler`: a partitioned trace on Dask gives the single-process report."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import rvguard.check
import rvguard.check_parallel
from rvguard.check import check_trace
from rvguard.check_parallel import check_partitioned
from rvguard.cli import main
from rvguard.contract import load_contract
from rvguard.errors import TraceProtocolError
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Fail, Sample

from .monitors.strategies import small_contract, wellformed_traces, within_floor
from .partitioned import write_one, write_partitions

distributed = pytest.importorskip("distributed")

CONTRACT = small_contract("tokens", epoch=0.3)
PROPS = ("AF", "SF", "DR", "WF", "ND")
SPEC = Path(__file__).parent.parent / "specs" / "marquee.yaml"


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fold must prove these traces itself (a fallback to the single-process check passes vacuously)."""

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("fell back to the single-process check")

    monkeypatch.setattr(rvguard.check_parallel, "check_trace", refuse)


@pytest.fixture(scope="module", params=[1, 2], ids=["1 worker", "2 workers"])
def scheduler(request: pytest.FixtureRequest) -> Iterator[str]:
    """A LocalCluster of threads on 127.0.0.1 (processes=False: quick to start)."""
    with distributed.LocalCluster(
        n_workers=request.param,
        threads_per_worker=1,
        processes=False,
        host="127.0.0.1",
        protocol="tcp",
        dashboard_address="127.0.0.1:0",  # no fixed port (8787 may be taken)
        silence_logs=logging.ERROR,
    ) as cluster:
        yield cluster.scheduler_address


def _plain(report: Any) -> dict[str, Any]:
    d: dict[str, Any] = report.to_dict()
    del d["trace"], d["seconds"]
    return d


def _with_extras(events: list[Event]) -> list[Event]:
    """Unknown fields on some rows: witnesses must keep them (they come from the record path)."""
    return [ev if i % 3 else dataclasses.replace(ev, extra={"note": f"n{i}"}) for i, ev in enumerate(events)]


#: an entitled, admitted request its backend failed for the client's fault, and no SF or AF
#: violation anywhere: the single-process check counts 1 client fault; the Dask check skipped its
#: attribution pass (nothing to attribute) and reported 0
CLIENT_FAULT_ALONE = [
    Arrive(0.5, "x", "a", deadline=1.5, prompt_tokens=1, max_tokens=1),
    Admit(0.5, "x", Basis.FLOOR),
    Dispatch(0.5, "x"),
    Fail(0.6, "x", "client-error: http 400"),
]


# the cluster's threads call the global `random` while hypothesis draws (it warns; harmless here:
# no strategy uses it)
@pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module:hypothesis.errors.HypothesisDeprecationWarning"
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=wellformed_traces(max_steps=50), cuts=st.lists(st.integers(0, 400), max_size=8))
@example(events=CLIENT_FAULT_ALONE, cuts=[]).via("the client_fault mismatch (issue 28)")
@example(events=CLIENT_FAULT_ALONE, cuts=[2]).via("the same, the fail in the second partition")
def test_dask_gives_the_single_process_report(
    scheduler: str, no_fallback: None, events: list[Event], cuts: list[int]
) -> None:
    """Random traces cut at random rows (inside windows, across open requests): identical reports."""
    events = _with_extras(within_floor(events, CONTRACT))  # AF's upper side kept: the fold proves it
    cuts = [min(c, len(events)) for c in cuts]  # drawn beyond the trace: cut at its end
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        one = rvguard.check.check_trace(
            str(write_one(events, root / "one.parquet")), CONTRACT, properties=PROPS
        )
        parts = write_partitions(events, cuts, root / "ds")
        report = check_partitioned(str(parts), CONTRACT, properties=PROPS, scheduler=scheduler)
        assert _plain(report) == _plain(one)
        assert report.violations == one.violations


def _served(rid: str, t: float) -> list[Event]:
    return [Arrive(t, rid, "assured"), Admit(t, rid, Basis.FLOOR), Dispatch(t, rid), Complete(t + 0.1, rid)]


def test_workers_start_their_own_cluster(tmp_path: Path, no_fallback: None) -> None:
    events = [ev for k in range(30) for ev in _served(f"r{k}", k * 0.25)]
    write_partitions(events, [13, 50, 51, 90], tmp_path)
    marquee = load_contract(SPEC)
    one = rvguard.check.check_trace(str(tmp_path), marquee)
    for n in (1, 2):
        assert _plain(check_partitioned(str(tmp_path), marquee, workers=n, processes=False)) == _plain(one)


def test_a_bad_row_is_reported_as_the_single_process_check_does(scheduler: str, tmp_path: Path) -> None:
    events = [*_served("x", 0.0), *_served("y", 1.0), Complete(2.0, "x")]  # x again after its end
    write_partitions(events, [5], tmp_path)
    with pytest.raises(TraceProtocolError) as parallel:
        check_partitioned(str(tmp_path), load_contract(SPEC), scheduler=scheduler)
    with pytest.raises(TraceProtocolError) as single:
        check_trace(str(tmp_path), load_contract(SPEC))
    assert str(parallel.value) == str(single.value) and "hour=1/part.parquet:4" in str(parallel.value)


def test_a_stray_file_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_partitions(_served("x", 0.0), [2], tmp_path)
    (tmp_path / "hour=1" / "notes.txt").write_text("not a partition")
    assert main(["check", str(tmp_path), "--contract", str(SPEC), "--workers", "1"]) == 2
    assert "hour=1/notes.txt: not a Parquet partition" in capsys.readouterr().err


def test_a_corrupt_partition_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_partitions(_served("x", 0.0), [2], tmp_path)
    (tmp_path / "hour=1" / "part.parquet").write_bytes(b"PAR1 not really")
    assert main(["check", str(tmp_path), "--contract", str(SPEC), "--workers", "1"]) == 2
    assert "hour=1/part.parquet: not a readable Parquet file" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--lenient"], ["--phase-sweep", "4"]])
def test_single_process_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    write_partitions(_served("x", 0.0), [2], tmp_path)
    assert main(["check", str(tmp_path), "--contract", str(SPEC), "--workers", "2", *flag]) == 2
    assert f"{flag[0]} reads the trace in one process" in capsys.readouterr().err


def test_missing_dask_exits_2_naming_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    write_partitions(_served("x", 0.0), [2], tmp_path)
    assert main(["check", str(tmp_path), "--contract", str(SPEC), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "distributed is not installed: pip install 'rvguard[dask]'" in err and "Traceback" not in err


def test_runbook_kinds_go_to_the_single_process_check(scheduler: str, tmp_path: Path) -> None:
    """A trace with DESIGN §10 rows (here a headroom sample) is judged by replay: the same report."""
    events = [Sample(0.0, "kv_cache", 0.5, 0.0), *_served("x", 0.1), *_served("y", 1.3)]
    write_partitions(events, [3], tmp_path)
    marquee = load_contract(SPEC)
    one = rvguard.check.check_trace(str(tmp_path), marquee)
    assert _plain(check_partitioned(str(tmp_path), marquee, scheduler=scheduler)) == _plain(one)


def test_the_command_takes_a_scheduler_address(
    scheduler: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [ev for k in range(12) for ev in _served(f"r{k}", k * 0.3)]
    write_partitions(events, [7, 30], tmp_path)
    assert main(["check", str(tmp_path), "--contract", str(SPEC), "--json"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert main(["check", str(tmp_path), "--contract", str(SPEC), "--json", "--scheduler", scheduler]) == 0
    parallel = json.loads(capsys.readouterr().out)
    del single["seconds"], parallel["seconds"]
    assert parallel == single
