"""Exhaustive search over small contracts, every candidate schedule replayed through `DecisionCore`.

The claim under test: no contract that `rvguard verify` accepts (by default:
the closing bound) has a floor request that misses its deadline.

Contracts (integer ticks, count credits, no reserve, ``excess: reject``):
C ∈ {1, 2}; two floored tenants at tiers 0 and 1 (floor 1 each, and floor 2
each at C = 2, W = 2), or three at tiers 0, 1, 2 (floor 1, C = 1, W = 2) or
0, 0, 1 (C = 2); ceilings s ∈ {1, 2} (both tenants alike, or 1 and 2 with
s_opp = 1); opportunistic ceiling s_opp ∈ {1, 2}; windows W ∈ {2, 4}; A4 holds. Deadlines:
every integer tick (the grid).

Candidate schedules of a contract: each floored tenant offers, in each of
three windows (two for the three-tenant shapes), none or one request at any
first or last tick of the window (the edges, where a window's floor can
straddle into the next; up to its floor: at C = 2 with floor 2, zero, one or
two requests), every request at its ceiling; one opportunistic job (service
s_opp) arrives at the tick of a lowest-tier arrival (delivered first: it
takes a free slot) or one tick before, or not at all; same-tick arrivals
reach the core opportunistic first, then floored tenants by tier. Each is
replayed through the real core (completions first at an instant, as the
Guard does); S_i is tenant i's worst sojourn.

The check, per tenant in tier order (higher tiers' deadlines set to the
smallest that `verify` accepts, the most permissive for a lower tier since its
bound grows with them): every integer deadline below S_i fails its
obligation, and the smallest accepted deadline is ≥ S_i. The issue's
counterexample to the former bound is in the grid (C = 1, W = 4, s = 2,
s_opp = 1); `test_issue_two_tier_counterexample` replays it alone.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from fractions import Fraction

from rvguard.enforce.core import DecisionCore
from rvguard.verify._z3 import load_z3
from rvguard.verify.encoding import Encoding, VerifyOptions
from rvguard.verify.obligations import decide, encode_deadline
from rvguard.verify.preconditions import all_hold, verify_contract
from rvguard.verify.synthesis import BoundAt, synthesize_deadline
from tests.verify._replay import OPP, Tenant, core_contract, replay

Shape = tuple[int, int, int, dict[str, Tenant], int]  # slots, window, windows of arrivals, tenants, s_opp


def shapes() -> Iterator[Shape]:
    """The contracts of the search (module doc), A4 holding."""
    for c, w, s_hi, s_lo, so, b in itertools.product((1, 2), (2, 4), (1, 2), (1, 2), (1, 2), (1,)):
        if (b == 2 and (c == 1 or w > 2)) or (s_hi == 2 and s_lo == 1) or (s_hi != s_lo and so == 2):
            continue
        tenants = {"hi": Tenant(0, b, s_hi), "lo": Tenant(1, b, s_lo)}
        if b * (s_hi + s_lo) <= c * w:
            yield c, w, 3, tenants, so
    for so in (1, 2):
        yield 1, 2, 2, {"a": Tenant(0, 1, 1), "b": Tenant(1, 1, 1), "c": Tenant(2, 1, 1)}, so
        yield 2, 2, 2, {"a": Tenant(0, 1, 1), "b": Tenant(0, 1, 2), "c": Tenant(1, 1, 1)}, so


def offers(floor: int, window: int, windows: int) -> list[tuple[int, ...]]:
    """One tenant's arrival ticks: per window, up to ``floor`` requests at its first or last tick."""
    edges = sorted({0, window - 1})
    per_window = [
        ticks for k in range(floor + 1) for ticks in itertools.combinations_with_replacement(edges, k)
    ]
    out = []
    for choice in itertools.product(per_window, repeat=windows):
        out.append(tuple(k * window + t for k, ticks in enumerate(choice) for t in ticks))
    return out


def worst_sojourns(shape: Shape) -> tuple[dict[str, int], int]:
    """S_i for every floored tenant over every candidate schedule, and how many schedules ran."""
    slots, window, windows, tenants, s_opp = shape
    contract = core_contract(window, slots, tenants, s_opp, {})
    names = sorted(tenants, key=lambda n: tenants[n].tier)
    worst = dict.fromkeys(names, 0)
    last = names[-1]
    per_tenant = [offers(tenants[n].floor, window, windows - (n == last)) for n in names]
    runs = 0
    for ticks in itertools.product(*per_tenant):
        near = sorted({a - d for a in ticks[-1] for d in (0, 1) if a - d >= 0})
        for opp in (None, *near):
            jobs = [] if opp is None else [(OPP, opp, s_opp)]
            for n, arrivals in zip(names, ticks, strict=True):
                jobs += [(n, t, tenants[n].s_max) for t in arrivals]
            jobs.sort(key=lambda j: (j[1], j[0] != OPP))  # stable: by tick, opp first, then by tier
            starts = replay(DecisionCore(contract), jobs)
            runs += 1
            for (n, a, s), st in zip(jobs, starts, strict=True):
                if n != OPP:
                    worst[n] = max(worst[n], st + s - a)
    return worst, runs


def holds(shape: Shape, deadlines: dict[str, float], tenant: str, options: VerifyOptions) -> bool:
    slots, window, _, tenants, s_opp = shape
    enc = Encoding(load_z3(), core_contract(window, slots, tenants, s_opp, deadlines), options=options)
    return decide(enc, encode_deadline(enc, tenant)).holds


SHAPES = list(shapes())


def test_search_finds_no_accepted_contract_that_misses() -> None:
    began, runs, tight = time.perf_counter(), 0, 0
    for shape in SHAPES:
        slots, window, _, tenants, s_opp = shape
        worst, n = worst_sojourns(shape)
        runs += n
        deadlines: dict[str, float] = {}
        for name in sorted(tenants, key=lambda t: tenants[t].tier):
            contract = core_contract(window, slots, tenants, s_opp, {**deadlines, name: 1.0})
            bound = BoundAt(contract, name, VerifyOptions())  # the clause is D ≥ bound(D)
            for d in range(1, worst[name]):
                f = bound(Fraction(d))
                assert f is None or f > d, (shape, name, worst, d, f)
            if worst[name] > 1:  # verify's own decision agrees where it matters most
                deadline = {**deadlines, name: float(worst[name] - 1)}
                assert not holds(shape, deadline, name, VerifyOptions()), (shape, name, worst)
            contract = core_contract(window, slots, tenants, s_opp, {**deadlines, name: float(worst[name])})
            least = synthesize_deadline(contract, name).value
            if least is None:
                break  # no deadline of this tenant is accepted, nor of a lower tier (whose bound needs it)
            assert least >= worst[name], (shape, name, worst, least)
            tight += least == worst[name]
            deadlines[name] = least
    elapsed = time.perf_counter() - began
    print(
        f"{len(SHAPES)} contracts, {runs} schedules through the core, {tight} bounds tight, {elapsed:.1f} s"
    )
    assert len(SHAPES) >= 20 and runs > 10_000


ISSUE_JOBS = [(OPP, 3, 1), ("hi", 3, 2), ("lo", 3, 2), ("hi", 4, 2), ("lo", 4, 2), ("hi", 8, 2), ("lo", 8, 2)]


def test_issue_two_tier_counterexample() -> None:
    """One slot, W = 4, hi (tier 0) and lo (tier 1) floor 1, s_max 2, s_opp 1, lo's deadline 9.

    The former bound (s_opp + ⌈2·(1 + 1)/1⌉·2 = 9 without the backlog assumption,
    1 + ⌈2/1⌉·2 = 5 with it) accepted it; the core finishes lo's request of t = 4 at 14.
    """
    tenants = {"hi": Tenant(0, 1, 2), "lo": Tenant(1, 1, 2)}
    contract = core_contract(4, 1, tenants, 1, {"hi": 9.0, "lo": 9.0})
    starts = replay(DecisionCore(contract), ISSUE_JOBS)
    assert starts[ISSUE_JOBS.index(("lo", 4, 2))] + 2 == 14  # sojourn 10 > 9
    for assume in (False, True):
        results = verify_contract(contract, options=VerifyOptions(backlog_assumption=assume))
        assert {r.name: r.holds for r in results}["deadline[lo]"] is False, assume
        assert not all_hold(results)
