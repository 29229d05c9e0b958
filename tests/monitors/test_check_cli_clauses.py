"""Issue 23's "Done when", end to end: ``rvguard check`` on one small trace file reports each broken
clause — exit code 1, the property VIOLATED in the verdict table, its row naming the request and
the clause — and a trace that keeps the clause passes.

Covered by an existing CLI test, so not repeated here: over-admission on the floor
(test_af_upper.py, `test_ten_floor_admits_with_b_6_fail_check_at_the_seventh`), more than C in
flight (test_cap.py, `test_ten_dispatched_at_once_under_c_4_fail_check`) and an eviction at an
exact credited tie (test_relief_mutations.py,
`test_ev_and_check_report_the_eviction_at_an_exact_credited_tie`). Here: a demoted entitled request
without a recorded reason (and with one: a declared exception, exit 3), an unjustified demote, a
stale restore, a guard-caused end of an entitled request, a route against the headroom.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Event,
    Fail,
    Restore,
    Route,
    Sample,
)
from rvguard.io import write_events

SPEC = {
    "window": 1.0,
    "slots": 4,
    "excess": "demote",
    "service": {"s_max": 0.5, "lower": 0.1},
    "tenants": {"a": {"floor": 2, "deadline": 3.0}, "o": {"floor": 0, "deadline": 3.0, "tier": 1}},
    "headroom": {"staleness": 0.5, "resources": {"kv": {"h_min": 0.2}}},
    "fleet": {"staleness": 0.5, "engines": {"e0": 2, "e1": 2}},
}


def _queued(rid: str, tenant: str = "o") -> list[Event]:
    return [Arrive(0.0, rid, tenant), Admit(0.0, rid)]


#: (name, the broken trace, the compliant one, --properties, property, rid, a phrase of its detail)
CASES = [
    (
        "demoted entitled request, no recorded reason",
        [Arrive(0.0, "a", "a"), Admit(0.0, "a", Basis.DEMOTED), Dispatch(0.0, "a"), Complete(0.2, "a")],
        [Arrive(0.0, "a", "a"), Admit(0.0, "a", Basis.FLOOR), Dispatch(0.0, "a"), Complete(0.2, "a")],
        None,
        "AF",
        "a",
        "admitted as demoted, not on the floor",
    ),
    (
        "unjustified demote (95 % headroom, h_min 20 %)",
        [Sample(0.0, "kv", 0.95, 0.0), *_queued("o"), Demote(0.1, "o", "kv", 0.0)],
        [Sample(0.0, "kv", 0.05, 0.0), *_queued("o"), Demote(0.1, "o", "kv", 0.0)],
        "WF,RL",
        "RL",
        "o",
        "does not justify a demotion",
    ),
    (
        "stale restore (a 2 s old sample, staleness 0.5 s)",
        [
            Sample(0.0, "kv", 0.05, 0.0),
            *_queued("o"),
            Demote(0.1, "o", "kv", 0.0),
            Sample(2.5, "kv", 1.0, 0.5),
            Restore(2.5, "o", "kv", 0.5),
        ],
        [
            Sample(0.0, "kv", 0.05, 0.0),
            *_queued("o"),
            Demote(0.1, "o", "kv", 0.0),
            Sample(2.5, "kv", 1.0, 2.4),
            Restore(2.5, "o", "kv", 2.4),
        ],
        "WF,RL",
        "RL",
        "o",
        "stale telemetry never restores",
    ),
    (
        "guard-caused end of an entitled request",
        [Arrive(0.0, "a", "a"), Admit(0.0, "a", Basis.FLOOR), Dispatch(0.0, "a"), Fail(0.1, "a", "shutdown")],
        [Arrive(0.0, "a", "a"), Admit(0.0, "a", Basis.FLOOR), Dispatch(0.0, "a"), Complete(0.1, "a")],
        "WF,PR",
        "PR",
        "a",
        "ended by the guard (fail reason 'shutdown')",
    ),
    (
        "route against the headroom",
        [
            *_queued("o"),
            Route(0.0, "o", "e1", 0.0, extra={"sampled": {"e0": 0.7, "e1": 0.4}}),
            Dispatch(0.0, "o"),
        ],
        [
            *_queued("o"),
            Route(0.0, "o", "e0", 0.0, extra={"sampled": {"e0": 0.7, "e1": 0.4}}),
            Dispatch(0.0, "o"),
        ],
        None,  # the default: FR is judged whenever the trace routes
        "FR",
        "o",
        "the engine with more headroom wins",
    ),
]


def _check(
    tmp_path: Path, events: list[Event], props: str | None, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    trace, contract = tmp_path / "t.jsonl", tmp_path / "c.json"
    write_events(trace, events)
    contract.write_text(json.dumps(SPEC), encoding="utf-8")
    args = ["check", str(trace), "--contract", str(contract)]
    code = main([*args, *([] if props is None else ["--properties", props])])
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "broken", "kept", "props", "prop", "rid", "phrase"), CASES, ids=[c[0] for c in CASES]
)
def test_check_reports_the_broken_clause(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    broken: list[Event],
    kept: list[Event],
    props: str | None,
    prop: str,
    rid: str,
    phrase: str,
) -> None:
    code, out = _check(tmp_path, broken, props, capsys)
    assert code == 1
    assert re.search(rf"^{prop}\s+VIOLATED\s+1\s", out, re.MULTILINE)
    [row] = [line for line in out.splitlines() if re.match(rf"{prop}\s+{rid}\s+[0-9.]+\s+\S", line)]
    assert phrase in row
    assert out.rstrip().endswith("verdict: VIOLATED")
    code, out = _check(tmp_path, kept, props, capsys)
    assert code == 0, out
    assert re.search(rf"^{prop}\s+holds so far\s+0\s", out, re.MULTILINE)


def test_a_demotion_with_its_recorded_reason_is_a_declared_exception(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same demoted entitled request, the pool's refusal recorded: reported apart, exit 3."""
    refused = Admit(0.0, "a", Basis.DEMOTED, extra={"floor_refused": "held"})
    code, out = _check(
        tmp_path, [Arrive(0.0, "a", "a"), refused, Dispatch(0.0, "a"), Complete(0.2, "a")], None, capsys
    )
    assert code == 3
    assert re.search(r"^AF\s+holds so far\s+0\s", out, re.MULTILINE)
    assert re.search(r"^AF\s+a\s+0\s+declared\s+credit pool refused: held", out, re.MULTILINE)
