"""The backlog lemma: search for a window-straddling counterexample, then close it.

1. With A4 and the reference deadline D = s_opp + ⌈B/C⌉·s_max, Z3 looks for a
   run (k = 3 windows, at most B entitled arrivals per window) where an
   entitled request misses D, and one where Q_A > B.
2. With the closing condition D = s_opp + ⌈2B/C⌉·s_max (cohort of two
   windows) Z3 looks again for a miss (none within the bounds). Q_A itself
   can still exceed 2B (a blocked cohort overlaps two later windows' arrivals)
   without any miss: the script prints that run too.

Run: python proofs/backlog_lemma.py
"""

from __future__ import annotations

import sys

from rvguard.verify.backlog import closing_bound, grid, reference_bound, search


def _show(label: str, result: object) -> None:
    print(label)
    print(f"  {result}")


def main() -> int:
    miss = search(grid(), reference_bound, "miss")
    if miss.params is None or miss.schedule is None:
        print(f"no counterexample to the reference bound within the bounds ({miss.checked} models)")
    else:
        p, s = miss.params, miss.schedule
        print(
            f"counterexample to Q_A ≤ B (A4 holds, D = s_opp + ⌈B/C⌉·s_max = {p.deadline}): "
            f"C={p.slots} B={p.floor} W={p.window} s_max={p.s_max} s_opp={p.s_opp}; "
            f"max assured sojourn {s.max_sojourn()} > {p.deadline}, max Q_A {s.max_backlog()} > {p.floor}"
        )
        for job in s.jobs:
            print(
                f"  {job.tenant:13} arrive {job.arrival:3} service {job.service} "
                f"start {job.start:3} finish {job.finish:3} sojourn {job.sojourn}"
            )
    backlog = search(grid(), reference_bound, "backlog")
    print(f"Q_A > B reachable under A4 + the reference bound: {backlog.params is not None}")
    closed = search(grid(), closing_bound, "miss")
    if closed.params is not None:
        print(f"closing condition fails: {closed}")
        return 1
    print(
        f"proved (bounds k = 3 windows, C ≤ 2, B ≤ 3, s_max ≤ 3, s_opp ≤ 3 ticks, ρ_a ∈ {{1, just below}}; "
        f"{closed.checked} models, {closed.seconds:.1f} s): with A4 and D ≥ s_opp + ⌈2B/C⌉·s_max "
        "no entitled request misses"
    )
    pile = search(grid(), closing_bound, "backlog", backlog_factor=2)
    if pile.params is not None and pile.schedule is not None:
        p, sch = pile.params, pile.schedule
        print(
            f"note: Q_A itself is not bounded by 2B: C={p.slots} B={p.floor} W={p.window} s_max={p.s_max} "
            f"s_opp={p.s_opp} reaches Q_A = {sch.max_backlog()} > {2 * p.floor}, "
            f"yet its max sojourn {sch.max_sojourn()} ≤ D = {p.deadline}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
