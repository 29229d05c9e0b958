"""A contract's validation errors are all reported at once, each naming its field and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rvguard.contract import contract_from_mapping, load_contract
from rvguard.errors import SpecError

BAD = """\
epoch: 0
window: -1
slots: "4"
output_cap: 0
service: {s_max: 0.66, lower: true}
tenants:
  assured: {floor: 6, deadline: 0, tier: x}
"""


def test_every_bad_field_is_reported_with_its_line(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(BAD)
    with pytest.raises(SpecError) as info:
        load_contract(p)
    err = info.value
    fields = [e.field for e in err.errors]
    assert sorted(fields) == sorted(
        ["window", "slots", "output_cap", "service.lower", "tenants.assured.deadline", "tenants.assured.tier"]
    )
    assert (err.field, err.value) == ("window", -1)  # the first, by line
    lines = str(err).splitlines()
    assert lines[0].startswith(f"{p}:2: window:") and len(lines) == len(fields)
    assert f"{p}:3: slots: expected a number, got the string '4' (write it without quotes)" in str(err)
    assert f"{p}:5: service.lower: expected a number, got True" in str(err)


def test_a_single_error_reads_as_before() -> None:
    with pytest.raises(SpecError) as info:
        contract_from_mapping(_valid(slots=0), source="c.yaml")
    assert str(info.value).startswith("c.yaml: slots: ") and "\n" not in str(info.value)
    assert info.value.errors == (info.value,)


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"slots": "4"}, "slots"),
        ({"window": "1.0"}, "window"),
        ({"epoch": "0"}, "epoch"),
        ({"fleet": {"staleness": 5, "engines": {"e0": "4"}}}, "fleet.engines.e0"),  # Annotated[int, ...]
        ({"eviction": {"k": "2"}}, "eviction.k"),
    ],
)
def test_a_quoted_number_is_refused_not_coerced(update: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=f"{field}: expected a number, got the string '") as info:
        contract_from_mapping(_valid(**update))
    assert info.value.field == field


def test_missing_fields_come_after_the_located_ones(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("window: 1\nslots: 0\n")
    with pytest.raises(SpecError) as info:
        load_contract(p)
    assert [e.field for e in info.value.errors] == ["slots", "service", "tenants"]


def _valid(**update: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "window": 1.0,
        "slots": 4,
        "service": {"s_max": 0.66, "lower": 0.236},
        "tenants": {"assured": {"floor": 6, "deadline": 1.82}},
    }
    return {**data, **update}
