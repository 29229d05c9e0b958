"""Restart-safe, bounded traces: a restart opens the next segment, ``check`` reads them as one history."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from rvguard.check import check_traces
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.errors import SpecError, TraceFormatError
from rvguard.gateway.app import Gateway
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.trace import prior_arrivals
from rvguard.io.segments import deployments, read_header
from rvguard.proposal import Proposal

from ._support import auth, contract, gateway, read_trace, settings


async def _serve_some(up: FakeUpstream, trace: Path, n: int, **over: object) -> None:
    s = settings(up.url, trace, **over)
    async with gateway(contract(), s) as (_gw, url), httpx.AsyncClient() as client:
        for i in range(n):
            r = await client.post(
                url + "/v1/completions",
                json={"prompt": f"p{i}", "max_tokens": 4},
                headers=auth("sk-assured" if i % 2 else "sk-opp"),
            )
            assert r.status_code in (200, 429), r.text


async def test_a_restarted_gateway_serves_on_and_check_reads_both_segments(tmp_path: Path) -> None:
    """Before: a second start on the same --trace raised SpecError (exit 2: a crash loop)."""
    trace = tmp_path / "t.jsonl"
    async with FakeUpstream() as up:
        await _serve_some(up, trace, 4)
        await _serve_some(up, trace, 3)
    second = tmp_path / "t.1.jsonl"
    first_head, second_head = read_header(str(trace)), read_header(str(second))
    assert first_head is not None and second_head is not None
    assert (first_head.segment, second_head.segment) == (0, 1)
    assert first_head.run != second_head.run  # each segment names its run
    assert first_head.origin == second_head.origin  # one time line
    one, two = read_trace(trace), read_trace(second)
    assert max(e["t"] for e in one) <= min(e["t"] for e in two)
    assert {e["rid"] for e in two if e["kind"] == "arrive"} == {"r1-g0", "r1-g1", "r1-g2"}
    for given in ([str(tmp_path)], [str(trace), str(second)], [str(second), str(trace)]):
        report = check_traces(given, contract(), properties=["AF", "SF", "DR", "WF"])
        # the restarted run counts the window's earlier arrivals (before: it forgot them and admitted
        # up to B again on the floor, which AF's upper side reported on the r1- requests)
        assert report.violations == [], report
        assert report.metrics.requests == 7
        assert report.lost == [] and report.fleet is None  # one deployment, not a fleet


async def test_the_trace_rotates_at_max_bytes_into_one_history(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    async with FakeUpstream() as up:
        await _serve_some(up, trace, 12, trace_max_bytes=1024)
    files = sorted(tmp_path.glob("t*.jsonl"))
    assert len(files) >= 2
    heads = [read_header(str(f)) for f in files]
    assert all(h is not None and h.run == heads[0].run for h in heads)  # type: ignore[union-attr]
    assert [h.reason for h in heads if h is not None].count("rotate") == len(files) - 1
    for f in files[:-1]:  # a file passes the bound by at most one line
        assert f.stat().st_size < 1024 + 600
    report = check_traces([str(tmp_path)], contract(), properties=["AF", "SF", "DR", "WF"])
    assert report.holds and report.metrics.requests == 12 and report.lost == []


def _segment(path: Path, run: str, segment: int, t: float, *events: dict[str, object]) -> None:
    head = {"kind": "segment", "t": t, "run": run, "segment": segment, "origin": 5.0, "replica": None}
    path.write_text("".join(json.dumps(r) + "\n" for r in (head, *events)))


def _opp(rid: str, t: float) -> list[dict[str, object]]:
    return [
        {"t": t, "kind": "arrive", "rid": rid, "tenant": "opportunistic"},
        {"t": t, "kind": "admit", "rid": rid, "basis": "surplus"},
        {"t": t, "kind": "dispatch", "rid": rid},
    ]


def test_requests_open_at_a_crash_are_lost_at_restart_not_wf(tmp_path: Path) -> None:
    _segment(tmp_path / "t.jsonl", "run-a", 0, 0.0, *_opp("g0", 0.1), *_opp("g1", 0.2))
    _segment(tmp_path / "t.1.jsonl", "run-b", 1, 3.0, *_opp("r1-g0", 3.1))
    report = check_traces([str(tmp_path)], contract(), properties=["AF", "SF", "DR", "WF"])
    assert [(x.rid, x.t) for x in report.lost] == [("g0", 3.0), ("g1", 3.0)]
    assert report.bad_lines == [] and report.violations == []
    first = {"rid": "g0", "t": 3.0, "segment": str(tmp_path / "t.jsonl")}
    assert report.to_dict()["lost_at_restart"][0] == first


def test_a_rotation_within_one_run_loses_nothing(tmp_path: Path) -> None:
    """The mutation of the test above: the same files, one run: g0 completes in the next segment."""
    _segment(tmp_path / "t.jsonl", "run-a", 0, 0.0, *_opp("g0", 0.1))
    _segment(tmp_path / "t.1.jsonl", "run-a", 1, 0.2, {"t": 0.3, "kind": "complete", "rid": "g0"})
    report = check_traces([str(tmp_path)], contract(), properties=["AF", "SF", "DR", "WF"])
    assert report.lost == [] and report.holds
    (tmp_path / "t.1.jsonl").unlink()  # a run's open request at the end of the history: not lost
    assert check_traces([str(tmp_path / "t.jsonl")], contract()).lost == []


def test_a_request_lost_at_restart_still_counts_against_the_floor(tmp_path: Path) -> None:
    """A crash is outside SF's preconditions; a floored request it lost is reported, never hidden."""
    arrive = {"t": 0.1, "kind": "arrive", "rid": "g0", "tenant": "assured"}
    admit = {"t": 0.1, "kind": "admit", "rid": "g0", "basis": "floor"}
    _segment(tmp_path / "t.jsonl", "run-a", 0, 0.0, arrive, admit)
    _segment(tmp_path / "t.1.jsonl", "run-b", 1, 0.5)
    report = check_traces([str(tmp_path)], contract(), properties=["AF", "SF", "DR", "WF"])
    assert [x.rid for x in report.lost] == ["g0"]
    assert [(v.property, v.rid) for v in report.violations] == [("SF", "g0")]


def test_replicas_are_a_fleet_and_each_replicas_segments_one_history(tmp_path: Path) -> None:
    files = (("a.jsonl", "a", 0, "1"), ("a.1.jsonl", "a", 1, "2"), ("b.jsonl", "b", 0, "3"))
    for name, replica, segment, run in files:
        head = {"kind": "segment", "t": 0, "run": run, "segment": segment, "origin": 0, "replica": replica}
        (tmp_path / name).write_text(json.dumps(head) + "\n")
    deps = deployments([str(tmp_path / n) for n in ("b.jsonl", "a.1.jsonl", "a.jsonl")])
    assert [d.paths for d in deps] == [
        (str(tmp_path / "b.jsonl"),),
        (str(tmp_path / "a.jsonl"), str(tmp_path / "a.1.jsonl")),
    ]
    report = check_traces([str(tmp_path)], contract())
    assert report.fleet is not None  # two replicas: merged as a fleet


def test_two_processes_under_one_replica_name_are_two_histories_by_file_name(tmp_path: Path) -> None:
    """Two live processes started as replica ``a`` each write segment 0 (and on): one history per
    file name, so the fleet can still be judged; one file given twice is still refused."""
    files = (("x.jsonl", 0, "1"), ("x.1.jsonl", 1, "2"), ("y.jsonl", 0, "3"), ("y.1.jsonl", 1, "3"))
    for name, segment, run in files:
        head = {"kind": "segment", "t": 0, "run": run, "segment": segment, "origin": 0, "replica": "a"}
        (tmp_path / name).write_text(json.dumps(head) + "\n")
    deps = deployments([str(tmp_path)])
    assert sorted(d.paths for d in deps) == [
        (str(tmp_path / "x.jsonl"), str(tmp_path / "x.1.jsonl")),
        (str(tmp_path / "y.jsonl"), str(tmp_path / "y.1.jsonl")),
    ]
    with pytest.raises(TraceFormatError, match="segment 1 given twice"):  # a file and its directory
        deployments([str(tmp_path), str(tmp_path / "x.1.jsonl")])


def test_a_header_is_read_only_on_the_first_line(tmp_path: Path) -> None:
    head = '{"kind":"segment","t":0,"run":"x","segment":0,"origin":0,"replica":null}\n'
    (tmp_path / "t.jsonl").write_text(head + head)
    with pytest.raises(Exception, match="unknown event kind") as err:
        check_traces([str(tmp_path / "t.jsonl")], contract())
    assert getattr(err.value, "line", None) == 2
    (tmp_path / "u.jsonl").write_text(head.replace('"segment":0', '"segment":-1'))
    with pytest.raises(Exception, match="segment") as err:
        check_traces([str(tmp_path / "u.jsonl")], contract())
    assert getattr(err.value, "field", None) == "segment"


def test_an_older_trace_without_a_header_is_still_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"t":0.0,"kind":"arrive","rid":"g0","tenant":"assured"}\n')
    with pytest.raises(SpecError, match="no segment header"):
        Gateway(contract(), settings("http://127.0.0.1:9", trace))


def test_check_on_the_command_line_names_the_lost_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from rvguard.cli import main

    from ._support import contract_data

    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(contract_data(contract())))
    traces = tmp_path / "traces"
    traces.mkdir()
    _segment(traces / "t.jsonl", "run-a", 0, 0.0, *_opp("g0", 0.1))
    _segment(traces / "t.1.jsonl", "run-b", 1, 3.0)
    assert main(["check", str(traces), "--contract", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "1 request(s) lost at restart" in out and "g0" in out
    assert "(2 segments)" in out


async def test_rvguard_serve_restarted_on_its_trace_serves_on(tmp_path: Path) -> None:
    """The process, twice on one --trace (a restarted pod): before, the second start exited 2."""
    from ._support import serve_process

    async with FakeUpstream() as up, httpx.AsyncClient(timeout=10.0) as client:
        statuses = []
        for _ in range(2):
            with serve_process(contract(), up.url, tmp_path) as (url, _trace):
                r = await client.post(
                    url + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, headers=auth("sk-assured")
                )
                statuses.append(r.status_code)
    assert statuses == [200, 200]
    segments = [str(tmp_path / "serve.jsonl"), str(tmp_path / "serve.1.jsonl")]
    report = check_traces(segments, contract(), properties=["AF", "SF", "DR", "WF"])
    assert report.holds and report.metrics.requests == 2 and report.lost == []


def test_the_trace_schema_states_the_header(tmp_path: Path) -> None:
    import jsonschema

    from rvguard.schema import trace_schema

    validator = jsonschema.Draft202012Validator(trace_schema())
    _segment(tmp_path / "t.jsonl", "run-a", 0, 0.0, *_opp("g0", 0.1))
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert all(validator.is_valid(r) for r in records)
    head = records[0]
    for bad in ({**head, "segment": -1}, {**head, "run": ""}, {**head, "rid": "g0"}, {**head, "reason": "x"}):
        assert not validator.is_valid(bad), bad
    del head["origin"]
    assert not validator.is_valid(head)


def test_a_missing_segment_is_named(tmp_path: Path) -> None:
    _segment(tmp_path / "t.jsonl", "run-a", 0, 0.0, *_opp("g0", 0.1))
    _segment(tmp_path / "t.2.jsonl", "run-a", 2, 0.5, {"t": 0.6, "kind": "complete", "rid": "g0"})
    with pytest.raises(TraceFormatError, match="segment 1 of this deployment is missing"):
        check_traces([str(tmp_path)], contract())


def _lines(path: Path, records: list[dict[str, object]], torn: str = "") -> None:
    head = {"kind": "segment", "t": 0.0, "run": path.stem, "segment": 0, "origin": 0.0, "replica": None}
    text = "".join(json.dumps(r) + "\n" for r in [{**head, "reason": "start"}, *records])
    path.write_text(text + torn, encoding="utf-8")


def test_a_restart_counts_only_the_windows_earlier_arrivals_and_names_torn_lines(tmp_path: Path) -> None:
    """The earlier run's arrivals in the restart's window are counted (floor admits as spent), an
    earlier window's are not, and a torn last line (the crash) is counted as unreadable, not lost."""

    trace = tmp_path / "t.jsonl"
    arrive = [
        {"kind": "arrive", "t": t, "rid": f"a{i}", "tenant": "assured"} for i, t in enumerate((0.2, 1.1, 1.3))
    ]
    admit = [{"kind": "admit", "t": r["t"], "rid": r["rid"], "basis": "floor"} for r in arrive]
    _lines(trace, [x for pair in zip(arrive, admit, strict=True) for x in pair], torn='{"kind": "arr')
    arrivals, unreadable = prior_arrivals(trace, 0, since=1.5 - 1.0)
    assert [(a[0], a[1], a[4]) for a in arrivals] == [("assured", 1.1, True), ("assured", 1.3, True)]
    assert unreadable == 1
    core = DecisionCore(contract())
    assert core.resume(1.5, [*arrivals, ("gone", 1.2, None, None, True)]) == 2  # a tenant no longer named

    # B = 2 already granted in window 1: the next assured arrival is not entitled (the learner decides)
    events = core.arrive(Request("n", "assured", 1.5, max_tokens=4), Proposal(admit=False), 1.5)
    assert [e.kind.value for e in events] == ["arrive", "reject"]
    fresh = DecisionCore(contract())  # without the resume: entitled, admitted on the floor
    assert [
        e.kind.value
        for e in fresh.arrive(Request("n", "assured", 1.5, max_tokens=4), Proposal(admit=False), 1.5)
    ][:2] == ["arrive", "admit"]


def test_a_start_that_fails_on_an_earlier_segment_leaves_no_new_segment(tmp_path: Path) -> None:
    """Before: each failed start (here an earlier segment with a line over the bound) first opened a
    new, empty segment, so a crash loop under a supervisor added t.1.jsonl, t.2.jsonl, ... a try."""
    from rvguard.bounds import MAX_LINE_BYTES
    from rvguard.errors import LineTooLongError

    trace = tmp_path / "t.jsonl"
    _segment(trace, "run-a", 0, 0.0, *_opp("g0", 0.1))
    with trace.open("a") as f:
        f.write('{"kind": "arrive", "rid": "' + "x" * (MAX_LINE_BYTES + 1) + '"}\n')
    for _ in range(3):
        with pytest.raises(LineTooLongError, match="line longer than"):
            Gateway(contract(), settings("http://127.0.0.1:9", trace))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]
