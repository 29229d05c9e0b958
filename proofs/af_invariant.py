"""AF for the credit logic by k-induction over its transition relation.

Invariant: credits used ≤ B and used ≤ offered (per tenant, per window);
step property: an entitled arrival is admitted on the floor, whatever the
learner proposes. The floor B is symbolic (every floor at once); count
credits and token credits (any weight ≥ w_min) are both checked, and two
mutants of the logic must fail, so the check is not vacuous.

Run: python proofs/af_invariant.py
"""

from __future__ import annotations

import sys

from rvguard.verify.af_induction import CreditLogic, prove_af


def main() -> int:
    ok = True
    for label, logic in [
        ("count credits", CreditLogic()),
        ("token credits", CreditLogic(tokens=True, w_min=0.5)),
    ]:
        r = prove_af(logic, max_k=4)
        if r.proved:
            print(f"proved (k-induction, k = {r.k}, every floor B, {label})")
        else:
            ok = False
            print(f"counterexample ({label}, depth {r.k}): {r.trace}")
    for label, mutant in [
        ("no credit reset at a new window", CreditLogic(reset_on_new_window=False)),
        ("learner admissions charged to the floor", CreditLogic(charge_learner_admits=True)),
    ]:
        r = prove_af(mutant, max_k=4)
        found = "counterexample found" if not r.proved and r.trace else "NOT refuted"
        ok = ok and not r.proved
        print(f"mutant '{label}': {found} (depth {r.k}): {r.trace}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
