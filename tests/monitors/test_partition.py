"""A partition's summary: which requests it settles, which it defers, and when it gives up."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import subprocess
import sys

import numpy as np

from rvguard.columnar import ColumnarTrace
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Route, Sample
from rvguard.monitors.partition import rid_hashes, summarise, take

from .strategies import small_contract

CONTRACT = small_contract("count")  # W = 1 s; tenant a: floor 2


def _summary(events: list[Event]):  # type: ignore[no-untyped-def]
    return summarise(ColumnarTrace.from_events(events), CONTRACT, ["AF", "SF"], index=0, path="p")


def _served(rid: str, t: float) -> list[Event]:
    return [Arrive(t, rid, "a"), Admit(t, rid, Basis.FLOOR), Dispatch(t, rid), Complete(t + 0.1, rid)]


def test_settled_deferred_and_orphan_requests() -> None:
    events = [
        Admit(0.5, "old", Basis.FLOOR),  # arrived in an earlier partition: an orphan row
        *_served("early", 0.6),  # arrives in the first window: its credit may have been spent before
        *_served("late", 1.2),  # a later window, ends here: settled
        Arrive(1.5, "open", "a"),  # still open at the end
    ]
    s = _summary(events)
    assert not s.problem
    assert [d.rid for d in s.deferred] == ["early", "open"]
    assert [d.first_window for d in s.deferred] == [True, False]
    assert [ev.rid for ev in s.rows] == ["old", *["early"] * 4, "open"]
    assert s.orphan == [True, False, False, False, False, False]
    assert s.settled is not None and s.settled.requests == 1
    assert (s.first_window, s.last_window) == (0, 1)
    assert s.credit_first == {"a": (1, 1)} and s.credit_last == {"a": (2, 2)}
    assert s.busy.tolist() == [(0.6 + 0.1) - 0.6, (1.2 + 0.1) - 1.2]  # no orphan end here: no nan
    assert s.arrived.tolist() == sorted(s.arrived.tolist()) and s.arrived.size == 3


def test_the_running_counts_are_cut_at_orphan_rows() -> None:
    """Segments: before the orphan admit, then from it on (its step is the fold's)."""
    s = _summary([*_served("x", 0.0)[:2], Admit(0.1, "old", Basis.FLOOR), Complete(0.2, "x")])
    # x: arrive, admit (+1) | old's admit | x ends (complete without dispatch is illegal, so:)
    assert s.problem == "a request breaks the protocol"
    s = _summary([*_served("x", 0.0)[:3], Admit(0.1, "old", Basis.FLOOR), Complete(0.2, "x")])
    (totals, highs), (rb_totals, rb_highs), (cap_totals, cap_highs) = s.counts
    assert totals.tolist() == [1, -1] and highs.tolist() == [1, 0]
    assert rb_totals.tolist() == [0, 0] and rb_highs.tolist() == [0, 0]  # x is floor work
    assert cap_totals.tolist() == [1, -1] and cap_highs.tolist() == [1, 0]  # CAP counts it
    surplus = [Arrive(0.0, "y", "o"), Admit(0.0, "y", Basis.SURPLUS), Dispatch(0.1, "y")]
    s = _summary([*surplus, Complete(0.2, "old"), Complete(0.3, "y")])
    assert [c.tolist() for c in s.counts[1]] == [[1, -1], [1, 0]]
    assert [c.tolist() for c in s.counts[2]] == [[1, -1], [1, 0]]  # old's end is the fold's step


def test_a_partition_bad_by_itself_is_a_problem() -> None:
    assert _summary([Arrive(1.0, "x", "a"), Arrive(0.5, "y", "a")]).problem == "time goes backwards"
    assert _summary([Arrive(1.0, "x", "nobody")]).problem == "an unknown tenant"
    assert _summary([Arrive(1.0, "x", "a"), Arrive(1.0, "x", "a")]).problem == "a request breaks the protocol"
    empty = _summary([])
    assert not empty.problem and empty.events == 0


RIDS = ["a", "b", "ab", "ba", "r10", "r01", "é", "x" * 64]


def test_rid_hashes_agree_across_processes() -> None:
    """Not Python's salted hash(): workers in other processes (other hash seeds) must agree."""
    code = f"from rvguard.monitors.partition import rid_hashes; print(rid_hashes({RIDS!r}).tolist())"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == str(rid_hashes(RIDS).tolist())
    assert len(set(rid_hashes(RIDS).tolist())) == len(RIDS)  # no collision among these


def test_long_rids_are_hashed_by_blake2b() -> None:
    long = ["y" * 65, "z" * 70]
    want = sorted(int.from_bytes(hashlib.blake2b(r.encode(), digest_size=8).digest()) for r in long)
    assert rid_hashes(long).tolist() == want
    assert rid_hashes([]).size == 0


def test_take_keeps_names_codes_and_lines() -> None:
    trace = ColumnarTrace.from_events(_served("x", 0.0) + _served("y", 1.0))
    part = take(trace, np.array([4, 7]))
    assert part.rid_names == trace.rid_names and part.rid.tolist() == [1, 1]
    assert part.line.tolist() == [5, 8] and [e.kind.value for e in part.events()] == ["arrive", "complete"]


def test_a_summary_pickles_with_the_c_pickler_and_round_trips() -> None:
    """Dask ships summaries between processes; extras on the events survive."""
    noted = dataclasses.replace(Complete(0.7, "early"), extra={"note": "kept"})
    events = [Admit(0.5, "old", Basis.FLOOR), *_served("early", 0.6)[:3], noted, *_served("late", 1.2)]
    s = summarise(
        ColumnarTrace.from_events(events),
        CONTRACT,
        ["AF", "SF"],
        index=0,
        path="p",
        records=lambda rows: [events[i] for i in rows],  # the record path keeps extras
    )
    back = pickle.loads(pickle.dumps(s))
    assert back.rows == s.rows and [ev.extra for ev in back.rows] == [ev.extra for ev in s.rows]
    assert back.rows[-1].extra == {"note": "kept"}
    assert back.deferred == s.deferred and back.busy.tolist() == s.busy.tolist()


def test_rows_of_the_runbook_kinds_are_left_to_the_single_process_check() -> None:
    """sample/route/demote…: the offline checker replays such traces, so the fold does not take them."""
    events = [Sample(0.0, "kv_cache", 0.5, 0.0), *_served("x", 0.1), Route(0.3, "y", "e1")]
    assert _summary(events[:1]).problem.startswith("rows of the DESIGN §10 kinds")
    assert _summary([*_served("x", 0.1)[:2], Route(0.3, "x", "e1")]).problem.startswith("rows of the DESIGN")
