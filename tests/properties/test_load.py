"""Property files: the examples load and match the JSON Schema; every error names file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from rvguard.errors import SpecError
from rvguard.properties.load import load_properties
from rvguard.properties.table import RemedyAction, Scope

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "properties").glob("*.yaml"))
SCHEMA = json.loads((ROOT / "specs" / "property.schema.json").read_text())

GOOD = """\
name: P
locations: [NEW, Q, BAD]
initial: NEW
bad: BAD
params: {k: 1}
counters:
  n: shared
edges:
  - {from: NEW, event: admit, to: Q}
  - {from: Q, event: dispatch, guard: n + 1 > k, to: BAD, remedy: delay}
"""


def test_examples_load_and_follow_the_schema() -> None:
    assert len(EXAMPLES) == 3
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for path in EXAMPLES:
        jsonschema.validate(yaml.safe_load(path.read_text()), SCHEMA)
        (table,) = load_properties(path)
        assert table.source == str(path) and table.edges


def test_a_good_table(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(GOOD)
    (t,) = load_properties(p)
    assert t.counter("n") is not None and t.counter("n").scope is Scope.SHARED  # type: ignore[union-attr]
    assert t.edges[1].remedy is not None and t.edges[1].remedy.action is RemedyAction.DELAY
    assert t.edges[1].guard_text == "n + 1 > k"
    jsonschema.validate(yaml.safe_load(GOOD), SCHEMA)


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "says"),
    [
        ("guard: n + 1 > k", "guard: n * n > k", 10, "edges.1.guard", "linear"),
        ("guard: n + 1 > k", "guard: m + 1 > k", 10, "edges.1.guard", "unknown name 'm'"),
        ("event: dispatch", "event: launch", 10, "edges.1.event", "unknown event kind"),
        (", remedy: delay", "", 10, "edges.1.remedy", "needs a remedy"),
        ("remedy: delay", "remedy: 'replace: teleport'", 10, "edges.1.remedy", "needs an event kind"),
        ("to: Q}", "to: R}", 9, "edges.0.to", "'R' is not declared"),
        ("bad: BAD", "bad: WORSE", 4, "bad", "not among the locations"),
        ("  n: shared", "  n: global", 7, "counters.n.scope", "one of"),
        ("params: {k: 1}", "params: {k: 1}\nextra: 1", 6, "extra", "unknown field"),
    ],
)
def test_errors_name_file_line_and_field(
    tmp_path: Path, old: str, new: str, line: int, field: str, says: str
) -> None:
    assert old in GOOD
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD.replace(old, new))
    with pytest.raises(SpecError) as err:
        load_properties(p)
    assert err.value.field == field
    assert str(err.value).startswith(f"{p}:{line}: "), str(err.value)
    assert says in str(err.value)


def test_unreadable_and_malformed(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_properties(tmp_path / "missing.yaml")
    p = tmp_path / "m.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid"):
        load_properties(p)
