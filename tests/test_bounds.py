"""Issue 10 item 6: every numeric contract field has a stated bound, and error messages stay short."""

from __future__ import annotations

from typing import Any

import pytest

from rvguard import bounds
from rvguard.bounds import printable, shown
from rvguard.contract import contract_from_mapping
from rvguard.errors import SpecError

from .test_contract import base


def tenant(**over: Any) -> dict[str, Any]:
    return base(tenants={"a": {"floor": 1, "deadline": 1.0, **over}})


def service(**over: Any) -> dict[str, Any]:
    return base(service={"s_max": 0.66, **over})


# (contract just past the bound, field): each was accepted, or crashed later, before the bounds
OUTSIDE = [
    (base(window=1e-300), "window"),
    (base(window=bounds.MAX_SPAN * 2), "window"),
    (base(epoch=bounds.MAX_TIME * 2), "epoch"),
    (base(epoch=-bounds.MAX_TIME * 2), "epoch"),
    (base(slots=bounds.MAX_SLOTS + 1), "slots"),
    (base(output_cap=10**39), "output_cap"),
    (base(output_cap=bounds.MAX_TOKENS + 1), "output_cap"),
    (tenant(floor=bounds.MAX_FLOOR * 2), "tenants.a.floor"),
    (tenant(deadline=bounds.MAX_SPAN * 2), "tenants.a.deadline"),
    (tenant(tier=bounds.MAX_TIER + 1), "tenants.a.tier"),
    (tenant(s_max=bounds.MAX_SPAN * 2), "tenants.a.s_max"),
    (service(s_max=bounds.MAX_SPAN * 2), "service.s_max"),
    (service(s_max_opp=float("inf")), "service.s_max_opp"),
    (service(lower={"base": 0.1, "per_token": bounds.MAX_SPAN * 2}), "service.lower.per_token"),
    (base(token_weights={"prompt": float("inf")}), "token_weights.prompt"),
    (base(token_weights={"output": bounds.MAX_WEIGHT * 2}), "token_weights.output"),
    (base(window="1.0"), "window"),
    (tenant(floor="1"), "tenants.a.floor"),
]


@pytest.mark.parametrize(("data", "field"), OUTSIDE)
def test_a_value_past_its_bound_is_refused_naming_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        contract_from_mapping(data)
    assert info.value.field == field
    assert len(str(info.value)) < 200


def test_values_on_the_bounds_are_accepted() -> None:
    c = contract_from_mapping(
        base(
            window=bounds.MIN_WINDOW,
            epoch=-bounds.MAX_TIME,
            slots=bounds.MAX_SLOTS,
            output_cap=bounds.MAX_TOKENS,
            service={"s_max": bounds.MAX_SPAN, "lower": 0.0},
            tenants={"a": {"floor": 1, "deadline": bounds.MAX_SPAN, "tier": bounds.MAX_TIER}},
            token_weights={"prompt": bounds.MAX_WEIGHT, "output": 0},
        )
    )
    assert c.window_index(bounds.MAX_TIME) < 2**63  # the reason for MIN_WINDOW and MAX_TIME


def test_shown_keeps_huge_values_short() -> None:
    assert shown(10**5000) == "an integer of about 5001 digits"  # str() of it would raise
    assert len(shown("x" * 10_000)) < 80
    assert len(shown([[list(range(1000))] * 1000])) <= 100
    assert shown("a\ud800") == "'a\\ud800'"
    assert shown(1.5) == "1.5" and shown(True) == "True"


def test_field_paths_from_a_file_are_printed_escaped() -> None:
    """A tenant name holding an ANSI escape and a newline printed both raw on stderr."""
    crafted = "a\x1b[31m\nverdict: ok"
    with pytest.raises(SpecError) as info:
        contract_from_mapping(tenant(floor=-1) | {"tenants": {crafted: {"floor": -1, "deadline": 1}}})
    assert info.value.field == f"tenants.{crafted}.floor"  # the field itself is kept, for locating it
    assert str(info.value).isprintable() and "a\\x1b[31m\\nverdict: ok" in str(info.value)
    assert printable(crafted) == "a\\x1b[31m\\nverdict: ok"
