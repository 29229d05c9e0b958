"""k-induction of AF over the credit logic, and mutants that must fail."""

from __future__ import annotations

from rvguard.verify.af_induction import CreditLogic, prove_af


def test_guard_logic_is_proved_for_count_and_tokens() -> None:
    assert prove_af(CreditLogic()).proved
    assert prove_af(CreditLogic(tokens=True, w_min=0.25)).proved


def test_missing_window_reset_is_refuted() -> None:
    r = prove_af(CreditLogic(reset_on_new_window=False))
    assert not r.proved and r.trace is not None
    # z3 may return either witness (its choice depends on the context's history):
    # an entitled request refused, or used credit above the offered credit (which leads to one)
    steps = [step for step in r.trace if "entitled" in step]
    assert any((s["entitled"] and not s["admitted"]) or s["used"] > s["offered"] for s in steps)


def test_charging_learner_admissions_is_refuted() -> None:
    r = prove_af(CreditLogic(charge_learner_admits=True))
    assert not r.proved and r.trace is not None
