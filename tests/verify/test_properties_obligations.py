"""Z3 obligations generated from property tables: each proved on the tables that meet it and shown a
counterexample on a table broken to miss it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main
from rvguard.properties import BUILTIN, Counter, PropertyTable, Scope, edge
from rvguard.properties.load import load_properties
from rvguard.properties.obligations import check_conflicts, check_table, verify_tables

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "properties"


def _cap(
    dispatch_ok: str = "n + 1 <= slots", *, extra: tuple = (), monitor_only: bool = False
) -> PropertyTable:
    return PropertyTable(
        name="T",
        description="",
        locations=("NEW", "Q", "RUN", "BAD", "DONE"),
        initial="NEW",
        bad="BAD",
        counters=(Counter("n", Scope.SHARED),),
        monitor_only=monitor_only,
        edges=(
            edge("NEW", "admit", "Q"),
            edge("Q", "dispatch", "RUN", dispatch_ok, ["n += 1"]),
            edge("Q", "dispatch", "BAD", f"not ({dispatch_ok})", ["n += 1"], "delay"),
            edge("RUN", "complete", "DONE", updates=["n -= 1"]),
            *extra,
        ),
    )


def _by_name(results: list) -> dict[str, object]:
    return {r.name: r for r in results}


def test_builtin_tables() -> None:
    """Every obligation of the built-ins holds (AF's remedy safety since its reject edge states the
    room its replace needs: single-table induction cannot relate the entitled arrivals waiting to the
    floor credit granted); SF comes out monitor-only."""
    results = verify_tables(list(BUILTIN.values()))
    failing = [(r.table, r.name) for r in results if not r.holds]
    assert failing == []
    sf = next(r for r in results if r.table == "SF" and r.name == "enforceability")
    assert sf.holds and "monitor-only" in sf.message and sf.counterexample
    proved = {r.name for r in results if r.holds and r.name.startswith("invariant")}
    assert proved == {"invariant granted <= floor", "invariant n <= slots - reserve", "invariant n <= slots"}
    # the six obligations for every table: five of its own (the invariants said even when none is
    # to prove) and the conflicts between them all
    kinds = {"determinism", "invariants", "remedy safety", "enforceability", "minimality"}
    for name in BUILTIN:
        seen = {"invariants" if "invariant" in r.name else r.name for r in results if r.table == name}
        assert seen == kinds, (name, seen)
    vacuous = {r.table: r.message for r in results if r.name == "counter invariants"}
    assert vacuous == {
        "WF": "none to prove: the table has no counters",
        "DR": "none to prove: the table has no counters",
        "PR": "none to prove: no edge into bad bounds used",
        "SF": "none to prove: no edge into bad bounds used",
    }
    assert [r.name for r in results if r.table == ", ".join(BUILTIN)] == ["no conflict"]


def test_examples_discharge_and_each_conflicts_with_the_floor() -> None:
    """Each example refuses admissions, so each can refuse the one AF requires (an entitled
    request's): Z3 names the pair, and live the floor admission goes out with a shield alert."""
    tables = [t for p in sorted(EXAMPLES.glob("*.yaml")) for t in load_properties(p)]
    assert all(r.holds for t in tables for r in check_table(t))
    conflicts = check_conflicts([BUILTIN["AF"], *tables])
    names = ("COOLDOWN", "TENANT_CONCURRENCY", "TENANT_TOKENS")
    assert {r.table for r in conflicts if not r.holds} == {
        f"{a}/{b}" for n in names for a, b in (("AF", n), (n, "AF"))
    }


def test_a_good_table_holds() -> None:
    assert all(r.holds for r in check_table(_cap()))


def test_determinism_fails_on_overlapping_guards() -> None:
    r = _by_name(check_table(_cap(extra=(edge("RUN", "complete", "Q", "n >= 0"),))))["determinism"]
    assert not r.holds and r.counterexample  # type: ignore[attr-defined]


def test_invariant_fails_when_the_bound_is_off_by_one() -> None:
    bad = _cap("n <= slots")  # admits the (C+1)-th: not inductive
    results = check_table(bad)
    inv = next(r for r in results if r.name.startswith("invariant"))
    assert not inv.holds and "n" in inv.counterexample and "slots" in inv.counterexample


def test_enforceability_fails_on_an_undeclared_uncontrollable_bad_edge() -> None:
    late = (edge("RUN", "fail", "BAD"),)
    assert not _by_name(check_table(_cap(extra=late)))["enforceability"].holds  # type: ignore[attr-defined]
    declared = _by_name(check_table(_cap(extra=late, monitor_only=True)))["enforceability"]
    assert declared.holds and "monitor-only" in declared.message  # type: ignore[attr-defined]


def test_remedy_safety_fails_when_the_replacement_is_bad_too() -> None:
    t = PropertyTable(
        name="R",
        description="",
        locations=("NEW", "A", "BAD"),
        initial="NEW",
        bad="BAD",
        edges=(
            edge("NEW", "arrive", "A"),
            edge("A", "reject", "BAD", remedy="replace: admit floor"),
            edge("A", "admit", "BAD", "floor_basis == 1", remedy="suppress"),
        ),
    )
    r = _by_name(check_table(t))["remedy safety"]
    assert not r.holds and r.counterexample["floor_basis"] == "1"  # type: ignore[attr-defined]


def test_minimality_fails_on_a_dead_or_overlapping_remedy() -> None:
    dead = _cap(extra=(edge("Q", "drop", "BAD", "1 < 0", remedy="suppress"),))
    assert "dead" in _by_name(check_table(dead))["minimality"].message  # type: ignore[attr-defined]
    overlap = _cap(
        extra=(edge("Q", "drop", "DONE", "t >= 0"), edge("Q", "drop", "BAD", "t >= 1", remedy="suppress"))
    )
    assert not _by_name(check_table(overlap))["minimality"].holds  # type: ignore[attr-defined]


def test_verify_properties_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--properties", str(EXAMPLES / "tenant_concurrency.yaml")]) == 0
    assert "all 6 obligations hold" in capsys.readouterr().out
    assert main(["verify", "--properties", "builtin", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [o["obligation"] for o in doc["obligations"] if not o["holds"]] == []
    assert main(["verify", "--properties", str(ROOT / "nope.yaml")]) == 2


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_builtin_has_determinism(name: str) -> None:
    assert _by_name(check_table(BUILTIN[name]))["determinism"].holds  # type: ignore[attr-defined]
