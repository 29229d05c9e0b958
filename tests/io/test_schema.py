"""specs/trace.schema.json: generated records validate, and the schema agrees with the reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.errors import TraceFormatError
from rvguard.events import Event, event_from_dict, event_to_dict

from .trace_strategies import events, names

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "specs" / "trace.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@settings(max_examples=300, deadline=None)
@given(events(text=names))
def test_written_records_validate(ev: Event) -> None:
    VALIDATOR.validate(event_to_dict(ev))


VALUES: list[Any] = [None, 0, 1, 2.5, -1, True, "", "x", "arrive", "floor", [1], {"admit": False}, {"k": 1}]
VALUES += [2**31 - 1, 2**31, 2**64, 10**400]  # the bounds of rvguard.bounds (times: TIMES)
VALUES += [
    0.5,
    1.5,
    999999999999.5,
    1.5e12 + 0.25,
    "p2c",
    "siloed",
    "kv",
]  # fractions, times, route modes (DESIGN §10)
TIMES = st.sampled_from([0, 1.5, -1, "1", None, 1e12, 1e13])
KINDS = st.sampled_from(
    ["arrive", "admit", "drop", "x", 3, "sample", "route", "demote", "restore", "evict", "relocate"]
)
KEYS = [
    "rid",
    "tenant",
    "deadline",
    "prompt_tokens",
    "max_tokens",
    "proposal",
    "basis",
    "reason",
    "z",
    "resource",
    "value",
    "sample_time",
    "state",
    "engine",
    "view_time",
    "mode",
    "headroom",
    "target",
    "capacity",
]
records = st.fixed_dictionaries(
    {"t": TIMES, "kind": KINDS},
    optional={k: st.sampled_from(VALUES) for k in KEYS},
)


@settings(max_examples=1000, deadline=None)
@given(records)
def test_schema_agrees_with_event_from_dict(rec: dict[str, Any]) -> None:
    rec = {k: v for k, v in rec.items() if not (k == "t" and v is None)}
    assert VALIDATOR.is_valid(rec) == _reader_accepts(rec), rec


def _reader_accepts(rec: dict[str, Any]) -> bool:
    """The reader's verdict on what the schema can state: "deadline >= t" is a cross-field rule it
    cannot, so a record refused for that alone is judged again with the deadline moved to ``t``."""
    try:
        event_from_dict(rec)
    except TraceFormatError as err:
        if err.field == "deadline" and "before the arrival" in err.reason:
            return _reader_accepts({**rec, "deadline": rec["t"]})
        return False
    return True


@pytest.mark.parametrize(
    "rec",
    [
        {"t": -1, "kind": "complete", "rid": "a"},
        {"t": 1, "kind": "teleport", "rid": "a"},
        {"t": 1, "kind": "arrive", "rid": "a"},
        {"t": 1, "kind": "admit", "rid": "a", "basis": "luck"},
        {"t": 1, "kind": "arrive", "rid": "a", "tenant": "x", "max_tokens": 1.5},
        {"t": 1, "kind": "arrive", "rid": "a", "tenant": "x", "proposal": {"admit": 1}},
        {"t": 1, "kind": "complete"},
    ],
)
def test_bad_records_are_rejected(rec: dict[str, Any]) -> None:
    assert not VALIDATOR.is_valid(rec)


def test_unknown_fields_are_allowed() -> None:
    VALIDATOR.validate({"t": 1, "kind": "dispatch", "rid": "a", "slot": 2, "meta": {"x": [1]}})


def test_a_decision_may_carry_the_learners_proposal_and_error() -> None:
    """The Guard traces a proposal asked after the arrival on the admit or reject (schema-checked)."""
    good = [
        {"t": 0.1, "kind": "admit", "rid": "o", "basis": "surplus", "proposal": {"admit": True}},
        {"t": 0.1, "kind": "reject", "rid": "p", "reason": "learner-timeout", "proposal": {"admit": False},
         "learner_error": "timeout: no answer within 0.1 s"},
    ]  # fmt: skip
    for record in good:
        VALIDATOR.validate(record)
        assert event_from_dict(record).extra["proposal"] == record["proposal"]  # kept, as unknown fields are
