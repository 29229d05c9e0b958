"""``rvguard schema``: the contract's JSON Schema accepts a document exactly when the loader does.

The oracle is the jsonschema library running the generated schema; the loader is
`contract_from_mapping`. Documents are valid contracts with random fields replaced, removed or
added (numbers in and out of range, whole and fractional, quoted numbers, booleans, nulls,
strings, lists, bound objects).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rvguard.cli import main
from rvguard.contract import contract_from_mapping
from rvguard.errors import SpecError
from rvguard.schema import contract_schema, trace_schema

VALIDATOR = jsonschema.Draft202012Validator(contract_schema())
BASES: list[dict[str, Any]] = [
    {
        "window": 1.0,
        "slots": 4,
        "service": {"s_max": 0.66, "lower": 0.236},
        "tenants": {"a": {"floor": 6, "deadline": 1.82}, "o": {"floor": 0, "deadline": 1.82, "tier": 1}},
    },
    {
        "epoch": 0.5,
        "window": 2,
        "slots": 2,
        "output_cap": 32,
        "excess": "demote",
        "credit": "tokens",
        "token_weights": {"prompt": 0.5, "output": 1},
        "service": {"s_max": 1, "s_max_opp": 2, "lower": {"base": 0.1, "per_token": 0.01}, "upper": 3},
        "tenants": {"a": {"floor": 2.5, "deadline": 4, "s_max": 0.9}},
        "headroom": {"staleness": 30, "dwell": 2, "resources": {"kv": {"h_min": 0.2, "hard_floor": 0.05}}},
        "eviction": {"k": 2},
        "fleet": {"staleness": 5, "engines": {"e0": 4, "e1": 2}},
    },
]
PATHS = [
    *[(k,) for k in ("epoch", "window", "slots", "output_cap", "excess", "credit", "token_weights")],
    ("reserve",),
    ("token_weights", "prompt"),
    ("token_weights", "output"),
    *[("service", k) for k in ("s_max", "s_max_opp", "lower", "upper")],
    *[("service", b, k) for b in ("lower", "upper") for k in ("base", "per_token")],
    ("tenants",),
    ("tenants", "a"),
    *[("tenants", "a", k) for k in ("floor", "deadline", "tier", "s_max")],
    ("unknown",),
    ("service", "unknown"),
    ("tenants", "a", "unknown"),
    ("tenants", "new"),
    # DESIGN §10's optional blocks
    *[(k,) for k in ("headroom", "eviction", "fleet")],
    *[("headroom", k) for k in ("alpha", "horizon", "dwell", "staleness", "resources")],
    *[("headroom", "resources", "kv", k) for k in ("h_min", "margin", "hard_floor", "unknown")],
    ("eviction", "k"),
    *[("fleet", k) for k in ("staleness", "engines", "unknown")],
    ("fleet", "engines", "e0"),
    ("fleet", "engines", ""),
]
NUMBERS = st.one_of(
    st.integers(-2, 8),
    st.floats(-2, 8, allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 0.0, 4.0, 2.5, -0.0, 1e-12, 1e6, 1e9, 1e12, 1e15, 1e20, 10**19, -1e12]),
)
VALUES = st.one_of(
    NUMBERS,
    st.none(),
    st.booleans(),
    st.sampled_from(["4", "0.5", "", "x", "reject", "demote", "count", "tokens"]),
    st.just([]),
    st.just({}),
    st.fixed_dictionaries({"base": NUMBERS}, optional={"per_token": NUMBERS}),
    st.fixed_dictionaries({"deadline": NUMBERS}, optional={"floor": NUMBERS, "tier": NUMBERS}),
)
DELETE = object()
#: the marks of the loader's cross-field rules (JSON Schema cannot compare two fields)
CROSS_FIELD_RULES = ("inverted bounds", "reserve above slots", "inverted headroom limits")
NESTED_RULE = "inverted headroom limits"  # a rule of the headroom block, checked before the contract's own
MUTATIONS = st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(VALUES, st.just(DELETE))), max_size=3)


def _mutated(base: dict[str, Any], mutations: list[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    doc = copy.deepcopy(base)
    for path, value in mutations:
        node: Any = doc
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        if value is DELETE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = copy.deepcopy(value)
    return doc


def _loader_verdict(doc: dict[str, Any]) -> tuple[bool, bool]:
    """(accepted, refused only by the cross-field rules JSON Schema cannot state).

    The headroom block's rule is checked inside that block, as a field of the contract: when it
    refuses, pydantic skips the contract's own checks (among them a rule the schema does state:
    whole floors under count credits), so the rest of the document is judged without the block.
    """
    try:
        contract_from_mapping(doc)
    except SpecError as err:
        cross = all(any(r in str(e) for r in CROSS_FIELD_RULES) for e in err.errors)
        if cross and any(NESTED_RULE in str(e) for e in err.errors):
            rest = {k: v for k, v in doc.items() if k != "headroom"}
            cross = _loader_verdict(rest) != (False, False)
        return False, cross
    return True, False


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(BASES), MUTATIONS)
def test_the_schema_accepts_exactly_what_the_loader_accepts(
    base: dict[str, Any], mutations: list[tuple[tuple[str, ...], Any]]
) -> None:
    doc = _mutated(base, mutations)
    accepted, cross_field_only = _loader_verdict(doc)
    valid = VALIDATOR.is_valid(doc)
    if cross_field_only:
        assert valid, doc  # the loader's cross-field rules are the only thing the schema cannot say
    else:
        assert valid == accepted, (doc, [e.message for e in VALIDATOR.iter_errors(doc)])


@pytest.mark.parametrize(
    ("update", "accepted"),
    [
        ({"service": {"s_max": 0.66, "lower": 0.236}}, True),  # the case: a number as a bound
        ({"service": {"s_max": 0.66, "lower": 1e20}}, False),  # a number as a bound has base's limits
        ({"service": {"s_max": 0.66, "upper": -1}}, False),
        ({"slots": "4"}, False),
        ({"slots": True}, False),
        ({"slots": 4.0}, True),
        ({"slots": 4.5}, False),
        ({"tenants": {"a": {"floor": 2.5, "deadline": 1}}}, False),  # count credits: whole floors
        ({"reserve": 2}, True),
        ({"reserve": -1}, False),
        ({"reserve": 1.5}, False),
        ({"eviction": {"k": 1}}, True),
        ({"eviction": {"k": 0}}, False),
        ({"fleet": {"staleness": 1, "engines": {"e0": 2}}}, True),
        ({"fleet": {"staleness": 1, "engines": {}}}, False),
        ({"fleet": {"staleness": 0, "engines": {"e0": 2}}}, False),
        ({"fleet": {"staleness": 1, "engines": {"": 2}}}, False),
        ({"headroom": {"staleness": 1, "resources": {"kv": {"h_min": 0.2}}}}, True),
        ({"headroom": {"resources": {"kv": {"h_min": 0.2}}}}, False),  # staleness is required
        ({"headroom": {"staleness": 1, "resources": {"kv": {"h_min": 0}}}}, False),
        ({"headroom": {"staleness": 1, "alpha": 1.5, "resources": {"kv": {"h_min": 0.2}}}}, False),
    ],
)
def test_named_cases(update: dict[str, Any], accepted: bool) -> None:
    doc = {**BASES[0], **update}
    assert VALIDATOR.is_valid(doc) is accepted
    assert _loader_verdict(doc)[0] is accepted


def test_the_schemas_are_valid_json_schemas() -> None:
    jsonschema.Draft202012Validator.check_schema(contract_schema())
    jsonschema.Draft202012Validator.check_schema(trace_schema())


def test_the_command_prints_either_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == contract_schema()
    assert main(["schema", "trace"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "rvguard trace record"
