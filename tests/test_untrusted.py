"""Issue 10 item 6: hostile contract files are refused fast, with a message, never a traceback.

Before `rvguard.untrusted`: a binary file raised `UnicodeDecodeError`, YAML
50k deep and JSON 100k deep raised `RecursionError` (exit 1, read by scripts
as "violation"), a 9-level alias bomb ran for minutes, and a duplicated key
was silently overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.bounds import MAX_ALIAS_NODES, MAX_DEPTH
from rvguard.contract import load_contract
from rvguard.errors import SpecError
from rvguard.untrusted import StructureError, json_too_deep, load_json, load_yaml

from .conftest import SPECS

MARQUEE_TEXT = (SPECS / "marquee.yaml").read_text(encoding="utf-8")


def bomb(levels: int, *, mapping: bool) -> str:
    """A billion-laughs YAML document whose bomb sits in a field the contract validates."""
    if mapping:
        lines = ["a0: &a0 {" + ", ".join(f"k{j}: x" for j in range(9)) + "}"]
        lines += [
            f"a{i}: &a{i} {{" + ", ".join(f"k{j}: *a{i - 1}" for j in range(9)) + "}"
            for i in range(1, levels)
        ]
    else:
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nwindow: 1\nslots: *a{levels - 1}\n"


def spec_error(tmp_path: Path, name: str, data: bytes | str) -> SpecError:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    with pytest.raises(SpecError) as info:
        load_contract(p)
    return info.value


@pytest.mark.parametrize("mapping", [True, False])
def test_an_alias_bomb_is_refused_by_its_budget(tmp_path: Path, mapping: bool) -> None:
    err = spec_error(tmp_path, "bomb.yaml", bomb(9, mapping=mapping))
    assert f"more than {MAX_ALIAS_NODES:,} nodes" in str(err)


def test_aliases_within_the_budget_still_work() -> None:
    data = load_yaml("base: &b {floor: 1, deadline: 2}\nt:\n  a: *b\n  c:\n    <<: *b\n    floor: 3\n")
    assert data["t"] == {"a": {"floor": 1, "deadline": 2}, "c": {"floor": 3, "deadline": 2}}


def test_deep_yaml_and_json_are_refused(tmp_path: Path) -> None:
    deep_yaml = "window: 1\nx: " + "[" * 50_000 + "]" * 50_000 + "\n"
    assert f"deeper than {MAX_DEPTH}" in str(spec_error(tmp_path, "c.yaml", deep_yaml))
    deep_json = '{"window": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert f"deeper than {MAX_DEPTH}" in str(spec_error(tmp_path, "c.json", deep_json))
    block = "".join(" " * i + f"k{i}:\n" for i in range(100)) + " " * 100 + "x: 1\n"
    assert f"deeper than {MAX_DEPTH}" in str(spec_error(tmp_path, "b.yaml", block))


def test_a_binary_file_is_not_a_contract(tmp_path: Path) -> None:
    err = spec_error(tmp_path, "c.yaml", bytes(range(256)) * 4)
    assert "not UTF-8 text" in str(err)
    err = spec_error(tmp_path, "big.yaml", b"#" * 2_000_000)
    assert "larger than" in str(err)


def test_duplicate_keys_are_refused_with_the_line(tmp_path: Path) -> None:
    err = spec_error(tmp_path, "c.yaml", MARQUEE_TEXT + "window: 2.0\n")
    assert "duplicate key 'window'" in str(err) and err.field == "window"
    assert str(err).startswith(f"{tmp_path / 'c.yaml'}:{MARQUEE_TEXT.count(chr(10)) + 1}:")
    err = spec_error(tmp_path, "c.json", '{"window": 1, "slots": 4, "window": 2}')
    assert "duplicate key 'window'" in str(err)


def test_a_leading_bom_is_ignored(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_bytes(b"\xef\xbb\xbf" + MARQUEE_TEXT.encode())
    assert load_contract(p) == load_contract(SPECS / "marquee.yaml")
    q = tmp_path / "c.json"
    q.write_bytes(b"\xef\xbb\xbf" + json.dumps(load_contract(p).model_dump(mode="json")).encode())
    assert load_contract(q) == load_contract(p)


def test_a_quoted_number_is_refused_and_an_exponent_is_a_number(tmp_path: Path) -> None:
    err = spec_error(tmp_path, "c.yaml", MARQUEE_TEXT.replace("window: 1.0", "window: '1.0'"))
    assert err.field == "window" and "the string '1.0'" in str(err)
    err = spec_error(tmp_path, "c.json", '{"window": "1.0"}')
    assert err.field == "window"
    p = tmp_path / "e.yaml"
    p.write_text(MARQUEE_TEXT.replace("window: 1.0", "window: 1e0"))
    assert load_contract(p).window == 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=3), lambda c: st.lists(c, max_size=3), max_leaves=20
    )
)
def test_json_depth_scan_agrees_with_the_parser(value: object) -> None:
    text = json.dumps(value)
    depth = _depth(value)
    assert json_too_deep(text, limit=2) == (depth > 2)


def _depth(value: object) -> int:
    return 1 + max(map(_depth, value), default=0) if isinstance(value, list) else 0


def test_load_json_refuses_duplicates_at_any_depth() -> None:
    with pytest.raises(StructureError, match="duplicate key 'b'"):
        load_json('{"a": {"b": 1, "b": 2}}')
    assert load_json('{"a": {"b": 1}, "b": 2}') == {"a": {"b": 1}, "b": 2}
