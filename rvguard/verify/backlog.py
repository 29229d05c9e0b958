"""The backlog lemma over the bounded schedule model (DESIGN §5, proofs/README.md).

The reference study assumes the assured backlog never carries across
windows (Q_A ≤ B) and proves D ≥ s_opp + ⌈B/C⌉·s_max under it. Here Z3
searches `rvguard.verify.schedule` for runs where A4 and that deadline
condition hold yet an entitled request misses or Q_A > B, and checks the
closing condition: the cohort of *two* windows,

    D ≥ s_opp + ⌈2B/C⌉ · s_max        (with A4),

within the bounds. The model's same-instant order (``ties``) is the
deployed completions-first one by default; ``"any"`` covers every order.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from .schedule import ModelParams, Schedule, Ties, find_schedule

__all__ = ["GridResult", "closing_bound", "grid", "reference_bound", "search"]


def reference_bound(p: ModelParams) -> int:
    """s_opp + ⌈B/C⌉ · s_max: the reference study's bound (needs Q_A ≤ B)."""
    return p.s_opp + p.waves(p.floor) * p.s_max


def closing_bound(p: ModelParams) -> int:
    """s_opp + ⌈2B/C⌉ · s_max: the two-window cohort bound that closes the gap."""
    return p.s_opp + p.waves(2 * p.floor) * p.s_max


def grid(
    *,
    slots: tuple[int, ...] = (1, 2),
    floors: tuple[int, ...] = (1, 2, 3),
    s_max: tuple[int, ...] = (2, 3),
    s_opp: tuple[int, ...] = (1, 3),
    windows: int = 3,
    ties: Ties = "completions-first",
) -> Iterator[ModelParams]:
    """Models with B ≥ C, at the tightest integer W satisfying A4 (ρ_a = 1 when C | B·s_max) and W + 1."""
    for c, b, s, so in itertools.product(slots, floors, s_max, s_opp):
        if b < c:
            continue
        w_min = -(-b * s // c)
        for w in (w_min, w_min + 1):
            yield ModelParams(
                slots=c, floor=b, window=w, s_max=s, s_opp=so, deadline=0, windows=windows, ties=ties
            )


@dataclass(frozen=True, slots=True)
class GridResult:
    """The first counterexample over a grid, or how many models were checked.

    Attributes:
        params: the model of the counterexample (None when none was found).
        schedule: the counterexample run.
        checked: models checked. seconds: wall time.
    """

    params: ModelParams | None
    schedule: Schedule | None
    checked: int
    seconds: float


def search(
    models: Iterator[ModelParams] | list[ModelParams],
    deadline: Callable[[ModelParams], int],
    goal: str,
    *,
    backlog_factor: int = 1,
) -> GridResult:
    """Search each model (with D = ``deadline(model)``) for a run reaching ``goal``.

    Args:
        models: the bounded models (A4 is checked; unstable ones are skipped).
        deadline: the deadline condition under test, as D for a model.
        goal: ``"miss"`` or ``"backlog"`` (see `find_schedule`).
        backlog_factor: with ``"backlog"``, look for Q_A > factor · B.

    Returns:
        The first counterexample, or the number of models proved free of one.
    """
    t0, checked = time.perf_counter(), 0
    for model in models:
        if not model.stable:
            continue
        p = replace(model, deadline=deadline(model))
        bound = backlog_factor * p.floor
        sched = find_schedule(p, goal, backlog_bound=bound) if goal == "backlog" else find_schedule(p, goal)
        checked += 1
        if sched is not None:
            return GridResult(p, sched, checked, time.perf_counter() - t0)
    return GridResult(None, None, checked, time.perf_counter() - t0)
