"""k-induction of AF over the credit logic, and mutants that must fail."""

from __future__ import annotations

from rvguard.verify.credit import CreditLogic, prove_af


def test_guard_logic_is_proved_for_count_and_tokens() -> None:
    assert prove_af(CreditLogic()).proved
    assert prove_af(CreditLogic(tokens=True, w_min=0.25)).proved


def test_missing_window_reset_is_refuted() -> None:
    r = prove_af(CreditLogic(reset_on_new_window=False))
    assert not r.proved and r.trace is not None
    assert any(step.get("entitled") and not step.get("admitted") for step in r.trace)


def test_charging_learner_admissions_is_refuted() -> None:
    r = prove_af(CreditLogic(charge_learner_admits=True))
    assert not r.proved and r.trace is not None
