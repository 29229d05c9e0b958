"""Confusion counts and the configuration-clustered bootstrap."""

from __future__ import annotations

from rvguard.screen.scoring import Confusion, score


def test_confusion_of() -> None:
    c = Confusion.of([True, True, False, False, True], [True, False, True, False, True])
    assert (c.tp, c.fp, c.fn, c.tn) == (2, 1, 1, 1)


def test_score_pools_and_brackets() -> None:
    per = [Confusion(8, 2, 1, 9), Confusion(5, 0, 5, 10), Confusion(0, 0, 3, 17)]
    s = score(per)
    assert s.precision == 13 / 15
    assert s.recall == 13 / 22
    assert s.coverage == 15 / 60
    assert s.precision_ci is not None and s.precision_ci[0] <= s.precision <= s.precision_ci[1]
    assert s.recall_ci is not None and s.recall_ci[0] <= s.recall <= s.recall_ci[1]


def test_identical_configs_give_a_point_interval() -> None:
    s = score([Confusion(3, 1, 2, 4)] * 5)
    assert s.precision_ci == (0.75, 0.75)


def test_no_accepts_is_undefined_precision() -> None:
    s = score([Confusion(0, 0, 4, 6)])
    assert s.precision is None and s.precision_ci is None
    assert s.recall == 0.0
    assert score([]).cells == 0
