"""The backlog-lemma search over a small grid (kept small: each model is a Z3 query)."""

from __future__ import annotations

from rvguard.verify.backlog import closing_bound, grid, reference_bound, search


def small() -> list:  # type: ignore[type-arg]
    return list(grid(slots=(1,), floors=(1, 2), s_max=(2, 3), s_opp=(1,), windows=2))


def test_reference_bound_has_a_counterexample() -> None:
    r = search(small(), reference_bound, "miss")
    assert r.params is not None and r.schedule is not None
    assert r.schedule.max_sojourn() > r.params.deadline
    assert r.params.floor * r.params.s_max <= r.params.slots * r.params.window  # A4 holds


def test_closing_bound_has_none_within_the_bounds() -> None:
    r = search(small(), closing_bound, "miss")
    assert r.params is None and r.checked > 0
