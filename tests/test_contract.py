"""The contract: loading, validation (one case per rule), window arithmetic, entitlement."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.contract import (
    Contract,
    Entitlement,
    contract_from_mapping,
    load_contract,
    window_index,
)
from rvguard.errors import SpecError

from .conftest import SPECS


def base(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "window": 1.0,
        "slots": 4,
        "service": {"s_max": 0.66, "lower": 0.236},
        "tenants": {"assured": {"floor": 6, "deadline": 1.82, "tier": 0}},
    }
    d.update(over)
    return d


def test_marquee_loads_with_the_reference_numbers(marquee: Contract) -> None:
    assert (marquee.slots, marquee.window, marquee.tenants["assured"].floor) == (4, 1.0, 6)
    assert marquee.service.s_max == 0.66 and marquee.service.lower.base == 0.236
    assert marquee.tenants["assured"].deadline == 1.82


def test_json_and_yaml_agree(tmp_path: Path, marquee: Contract) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps(marquee.model_dump(mode="json")))
    assert load_contract(p) == marquee


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (base(window=0), "window"),
        (base(window=-1.0), "window"),
        (base(slots=0), "slots"),
        (base(window=float("inf")), "window"),
        (base(tenants={}), "tenants"),
        (base(tenants={"a": {"floor": -1, "deadline": 1}}), "tenants.a.floor"),
        (base(tenants={"a": {"floor": 1, "deadline": 0}}), "tenants.a.deadline"),
        (base(tenants={"a": {"floor": 1.5, "deadline": 1}}), "tenants.a.floor"),
        (base(service={"s_max": 0.5, "lower": 0.6}), "service.lower"),
        (base(service={"s_max": 0.5, "lower": 0.2, "upper": 0.1}), "service.upper"),
        (base(service={"s_max": -0.5}), "service.s_max"),
        (base(excess="maybe"), "excess"),
        (base(credit="coins"), "credit"),
        (base(surprise=1), "surprise"),
    ],
)
def test_validation_names_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        contract_from_mapping(data)
    assert info.value.field == field
    assert field in str(info.value)


def test_bad_files_are_spec_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("window: [1,\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_contract(bad)
    with pytest.raises(SpecError, match="cannot read"):
        load_contract(tmp_path / "missing.yaml")
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n")
    with pytest.raises(SpecError, match="mapping"):
        load_contract(listy)


def test_lower_bound_grows_with_output_tokens_up_to_the_cap() -> None:
    c = contract_from_mapping(
        base(output_cap=10, service={"s_max": 1.0, "lower": {"base": 0.1, "per_token": 0.01}})
    )
    assert c.lower_bound(5) == pytest.approx(0.15)
    assert c.lower_bound(100) == pytest.approx(0.2)
    assert c.lower_bound(None) == pytest.approx(0.2)


@given(
    st.integers(-1000, 1000),
    st.sampled_from(["0.1", "0.3", "1.0", "1.82", "7.0"]),
    st.sampled_from(["0", "0.05", "3.3"]),
)
def test_a_time_written_at_a_decimal_edge_is_in_the_window_it_opens(k: int, w: str, origin: str) -> None:
    """epoch + k·W as decimals (0.3 · 51 = 15.3, not the float 15.299999999999999) opens window k."""
    edge = Fraction(origin) + k * Fraction(w)
    t = float(edge)  # the float a trace holds for the decimal edge written in it
    assert Fraction(repr(t)) == edge
    assert window_index(t, float(origin), float(w)) == k


@given(
    st.floats(0, 1e6, allow_nan=False),
    st.sampled_from(["0.1", "0.3", "1.0", "1.82"]),
    st.sampled_from(["0", "0.05"]),
)
def test_every_time_lies_in_its_window_as_decimals(t: float, w: str, origin: str) -> None:
    k = window_index(t, float(origin), float(w))
    at = Fraction(repr(t))
    assert Fraction(origin) + k * Fraction(w) <= at < Fraction(origin) + (k + 1) * Fraction(w)


def test_entitlement_counts_the_first_b_arrivals_per_window(marquee: Contract) -> None:
    ent = Entitlement(marquee)
    flags = [ent.arrive("assured", 0.1 * i)[1] for i in range(8)]
    assert flags == [True] * 6 + [False] * 2
    assert ent.arrive("assured", 1.0)[:3] == (1, True, 1)
    assert ent.arrive("opportunistic", 1.0)[1] is False


def test_token_credits_use_the_weight_prefix() -> None:
    c = contract_from_mapping(base(credit="tokens", tenants={"a": {"floor": 100, "deadline": 1}}))
    ent = Entitlement(c)
    assert ent.arrive("a", 0.0, c.weight_units(10, 50))[1] is True  # 10 + 48 (capped)
    assert ent.arrive("a", 0.1, c.weight_units(0, 50))[1] is False  # 58 + 48 > 100
    assert c.weight(10, 20) == 30.0


def test_shipped_specs_load() -> None:
    for p in SPECS.glob("*.yaml"):
        assert isinstance(load_contract(p), Contract)


def test_a_boolean_where_a_number_belongs_is_refused() -> None:
    with pytest.raises(SpecError, match=r"slots: expected a number, got True") as info:
        contract_from_mapping(base(slots=True))
    assert info.value.field == "slots"
    with pytest.raises(SpecError, match=r"tenants\.a\.floor"):
        contract_from_mapping(base(tenants={"a": {"floor": True, "deadline": 1}}))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("epoch: 0\nwindow: 1\nslots: 0\n", ":3: slots:"),
        (
            "epoch: 0\nwindow: 1\nslots: 4\nservice: {s_max: 1, s_max_opp: 1, lower: 0.1}\n"
            "tenants:\n  a:\n    floor: -3\n    deadline: 1\n",
            ":7: tenants.a.floor:",
        ),
    ],
)
def test_contract_errors_name_the_line(tmp_path: Path, text: str, where: str) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(SpecError) as info:
        load_contract(p)
    assert str(info.value).startswith(f"{p}{where}")


@pytest.mark.parametrize(
    ("reserve", "message"),
    [
        (5, "reserve: R = 5 exceeds slots C = 4"),
        (-1, "greater than or equal to 0"),
        (1.5, "valid integer"),
        (True, "expected a number"),
        ("1", "without quotes"),
    ],
)
def test_a_reserve_outside_0_to_slots_is_refused_naming_it(reserve: Any, message: str) -> None:
    with pytest.raises(SpecError) as info:
        contract_from_mapping(base(reserve=reserve))
    assert info.value.field == "reserve"
    assert message in str(info.value)


@pytest.mark.parametrize("reserve", [0, 1, 4])
def test_a_reserve_from_0_to_slots_is_accepted(reserve: int) -> None:
    assert contract_from_mapping(base(reserve=reserve)).reserve == reserve
    assert contract_from_mapping(base()).reserve == 0  # the default: no reserve


RUNBOOK = {
    "headroom": {
        "alpha": 0.25,
        "horizon": 30,
        "dwell": 2,
        "staleness": 20,
        "resources": {"kv": {"h_min": 0.2}},
    },
    "eviction": {"k": 2},
    "fleet": {"staleness": 5, "engines": {"e0": 4, "e1": 2}},
}


def test_the_runbook_blocks_are_optional_and_map_onto_the_redline() -> None:
    from rvguard.enforce.redline import redline_config

    plain = contract_from_mapping(base())
    assert (plain.headroom, plain.eviction, plain.fleet) == (None, None, None)
    c = contract_from_mapping(base(**RUNBOOK))
    assert c.eviction is not None and c.eviction.k == 2
    assert c.fleet is not None and dict(c.fleet.engines) == {"e0": 4, "e1": 2}
    assert c.headroom is not None
    config = redline_config(c.headroom)
    assert (config.alpha, config.horizon, config.dwell) == (0.25, 30.0, 2)
    [limit] = config.resources
    assert (limit.name, limit.h_min, limit.margin, limit.hard_floor) == ("kv", 0.2, 0.05, 0.0)


@pytest.mark.parametrize(
    ("update", "field", "message"),
    [
        ({"eviction": {"k": 0}}, "eviction.k", "greater than or equal to 1"),
        ({"eviction": {}}, "eviction.k", "required"),
        ({"fleet": {"staleness": 5, "engines": {"e0": 0}}}, "fleet.engines.e0", "greater than or equal to 1"),
        ({"fleet": {"staleness": -1, "engines": {"e0": 1}}}, "fleet.staleness", "greater than 0"),
        ({"fleet": {"staleness": 1, "engines": {}}}, "fleet.engines", "at least 1"),
        ({"headroom": {"resources": {"kv": {"h_min": 0.2}}}}, "headroom.staleness", "required"),
        (
            {"headroom": {"staleness": 1, "dwell": 0, "resources": {"kv": {"h_min": 0.2}}}},
            "headroom.dwell",
            ">",
        ),
        (
            {"headroom": {"staleness": 1, "alpha": 0, "resources": {"kv": {"h_min": 0.2}}}},
            "headroom.alpha",
            ">",
        ),
        ({"headroom": {"staleness": 1, "resources": {}}}, "headroom.resources", "at least 1"),
        (
            {"headroom": {"staleness": 1, "resources": {"kv": {"h_min": 0.2, "hard_floor": 0.3}}}},
            "headroom.resources.kv",
            "inverted headroom limits",
        ),
        (
            {"headroom": {"staleness": 1, "resources": {"kv": {"h_min": 0.9, "margin": 0.2}}}},
            "headroom.resources.kv",
            "could never clear",
        ),
        ({"eviction": {"k": 1, "burst": 2}}, "eviction.burst", "Extra inputs"),
    ],
)
def test_a_bad_runbook_block_is_refused_naming_the_field(
    update: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(SpecError) as info:
        contract_from_mapping(base(**update))
    assert info.value.field == field
    assert message in str(info.value) or (message == ">" and "greater than" in str(info.value))
