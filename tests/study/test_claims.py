"""The claim table: every claim answers from documents, says "—" without them, and verdicts follow shapes."""

from __future__ import annotations

from typing import Any

import pytest

from rvguard.study.claim_answers import calibration, cond, conds, fmt, screen_held_out, unguarded_beta
from rvguard.study.claims import CLAIMS


def _doc(*conditions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"conditions": list(conditions), **extra}


def test_every_claim_without_documents_is_unmeasured() -> None:
    for claim in CLAIMS:
        assert claim.answer({}) == ("—", None) or claim.answer({})[0] == "not run", claim.text
    assert len(CLAIMS) >= 35  # one row per quantitative claim of the study's evaluation


def test_cond_and_fmt() -> None:
    doc = _doc({"params": {"a": 1, "b": 2}}, {"params": {"a": 1, "b": 3}})
    assert len(conds(doc, a=1)) == 2 and cond(doc, b=3) == {"params": {"a": 1, "b": 3}}
    assert cond(doc, b=4) is None
    assert (fmt(None), fmt(0.12345), fmt(3), fmt(0.5, 1)) == ("—", "0.123", "3", "0.5")


def _beta(miss: dict[float, float]) -> dict[str, Any]:
    return {
        "beta-sweep": _doc(
            *({"params": {"beta": b, "guard": False, "learner": "lsq", "assured": "paced"}, "assured_miss": m}
              for b, m in miss.items())
        )
    }  # fmt: skip


@pytest.mark.parametrize(
    ("miss", "shape"),
    [
        ({0.0: 0.9, 0.5: 0.9, 1.0: 0.88, 2.0: 0.86}, True),  # the study's band at every β
        ({0.0: 0.9, 0.5: 0.9, 1.0: 0.5, 2.0: 0.0}, "partly"),  # the band at low β only
        ({0.0: 0.2, 0.5: 0.1, 1.0: 0.0, 2.0: 0.0}, False),
    ],
)
def test_unguarded_beta_shape(miss: dict[float, float], shape: object) -> None:
    text, got = unguarded_beta(_beta(miss))
    assert got == shape and "β=2: " in text


def test_calibration_shape_by_relative_error() -> None:
    doc = {"calibration": {"measured": {"x": 1.05, "y": 1.2, "z": 2.0}, "targets": {"x": 1.0, "y": 1.0}}}
    assert calibration("x")(doc) == ("1050 ms (+5 %)", True)
    assert calibration("y")(doc)[1] == "partly"
    assert calibration("z", study=1.0)(doc)[1] is False


def test_screen_held_out_shape_is_a_drop() -> None:
    rows = [
        {"scope": "in-sample", "dial": "p99", "regime": "all", "precision": 1.0, "cells": 10},
        {"scope": "held-out", "dial": "p99", "regime": "all", "precision": 0.9, "cells": 40},
    ]
    text, shape = screen_held_out({"screen-eval": {"summary": rows}})
    assert shape is True and text.startswith("1.000 → 0.900")
