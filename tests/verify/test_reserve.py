"""The deadline with a reserve (`rvguard.verify.reserve`): the bound, the z3 clause, the schedule model
and the real core agree.

* `reserve_bound` against a plain scan of the worst-case schedule's start grid, and its two
  special cases (R = 0 is the reserve-free bound, R = C drops surplus blocking);
* z3's clause accepts exactly the deadlines ≥ that bound (`synthesize_deadline` finds it), and
  `synthesize_reserve` finds the smallest R (checked against a loop over every R);
* the bounded schedule model with a reserve: no miss at the bound, a miss one tick below it
  (the bound is tight), the model's runs equal `simulate`'s, and the real `DecisionCore`
  replays them job for job (`test_core_differential`'s driver, given the reserve).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.contract import Contract, contract_from_mapping
from rvguard.verify.encoding import VerifyOptions
from rvguard.verify.preconditions import verify_contract
from rvguard.verify.reserve import reserve_bound
from rvguard.verify.schedule import ASSURED, OPPORTUNISTIC, ModelParams, Schedule, find_schedule, simulate
from rvguard.verify.synthesis import synthesize_deadline, synthesize_reserve

from .test_core_differential import assert_agrees


def _scan(n: int, c: int, r: int, wave: Fraction, block: Fraction, fblock: Fraction) -> Fraction:
    """The worst case by hand: R slots start cohort members at fblock, fblock + ŝ, …; the other C − R at
    block, block + ŝ, …; walk the merged start times in order until the n-th start."""
    times = sorted(
        [fblock + j * wave for _ in range(r) for j in range(n)]
        + [block + j * wave for _ in range(c - r) for j in range(n)]
    )
    return times[n - 1] + wave


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 5),
    st.data(),
    st.integers(1, 9).map(lambda k: Fraction(k, 4)),
    st.integers(0, 12).map(lambda k: Fraction(k, 4)),
    st.integers(0, 12).map(lambda k: Fraction(k, 4)),
)
def test_the_bound_is_the_worst_case_schedules_nth_start(
    n: int, c: int, data: st.DataObject, wave: Fraction, b: Fraction, bf: Fraction
) -> None:
    r = data.draw(st.integers(0, c), label="reserve")
    block = max(b, bf)  # b = max(b_s, b_f)
    t = reserve_bound(n, c, r, wave, block, bf)
    assert t == _scan(n, c, r, wave, block, bf)
    if r == 0:
        assert t == block + math.ceil(n / c) * wave  # the reserve-free clause
    if r == c:
        assert t == bf + math.ceil(n / c) * wave  # surplus never runs, never blocks
    if r < c:
        assert reserve_bound(n, c, r + 1, wave, block, bf) <= t  # more reserve never hurts


def _contract(c: int, r: int, floor: int, s_max: float, s_opp: float, deadline: float) -> Contract:
    return contract_from_mapping(
        {
            "window": 100.0,
            "slots": c,
            "reserve": r,
            "service": {"s_max": s_max, "s_max_opp": s_opp},
            "tenants": {
                "a": {"floor": floor, "deadline": deadline, "tier": 0},
                "o": {"floor": 0, "deadline": 10.0, "tier": 1},
            },
        }
    )


CASES = [
    (c, r, b, s, so)
    for c, b, s, so in itertools.product((1, 2, 4), (1, 3, 6), (0.66, 0.5), (0.66, 1.3))
    for r in range(c + 1)
]


@pytest.mark.parametrize(("c", "r", "b", "s", "so"), CASES[::3])
def test_z3_accepts_exactly_the_deadlines_from_the_bound(c: int, r: int, b: int, s: float, so: float) -> None:
    # W = 100 s ≥ every deadline here: by the closing bound two windows' floors (2B) can be ahead
    want = float(reserve_bound(2 * b, c, r, Fraction(repr(s)), Fraction(repr(so)), Fraction(0)))
    contract = _contract(c, r, b, s, so, 50.0)
    assert synthesize_deadline(contract).value == pytest.approx(want, abs=1e-12)
    for deadline, holds in ((want, True), (want - 1e-6, False)):
        [dl] = [
            x for x in verify_contract(_contract(c, r, b, s, so, deadline)) if x.name.startswith("deadline")
        ]
        assert dl.holds is holds, dl.message
        assert f"= {want:.2f}" in dl.message or f"= {math.ceil(want * 1000 - 1e-9) / 1000:.3f}" in dl.message


@pytest.mark.parametrize(("c", "b", "s", "so"), [(4, 6, 0.66, 0.66), (2, 3, 0.5, 1.3), (3, 6, 0.5, 0.66)])
@pytest.mark.parametrize("deadline", [0.6, 1.0, 1.32, 1.82, 2.5])
def test_the_smallest_reserve_is_the_first_that_holds(
    c: int, b: int, s: float, so: float, deadline: float
) -> None:
    holding = [
        r
        for r in range(c + 1)
        if all(
            x.holds for x in verify_contract(_contract(c, r, b, s, so, deadline)) if x.name.startswith("dead")
        )
    ]
    got = synthesize_reserve(_contract(c, 0, b, s, so, deadline))
    assert got.value == (holding[0] if holding else None), got.message
    assert holding == list(range(holding[0], c + 1)) if holding else True  # monotone in R


def test_the_marquee_needs_more_than_a_reserve() -> None:
    """B = 6, C = 4, 12 ahead (two windows, W = 100 s): at D = 1.82, starts(1.16) = 2R + (4 − R) < 12 for
    every R ≤ 4; at D = 2.5, starts(1.84) = 3R + 2(4 − R) = 8 + R reaches 12 at R = 4."""
    assert "no reserve meets" in synthesize_reserve(_contract(4, 0, 6, 0.66, 0.66, 1.82)).message
    assert synthesize_reserve(_contract(4, 0, 6, 0.66, 0.66, 2.5)).value == 4
    assumed = synthesize_reserve(
        _contract(4, 0, 6, 0.66, 0.66, 1.82), options=VerifyOptions(backlog_assumption=True)
    )
    assert assumed.value == 2 and "proven only under the backlog assumption" in assumed.message


# -- the bounded schedule model ------------------------------------------------
MODEL = [
    ModelParams(slots=c, floor=b, window=60, s_max=s, s_opp=so, deadline=0, windows=1, reserve=r)
    for c, b, s, so in itertools.product((1, 2, 3), (1, 3, 4), (2, 3), (1, 4))
    for r in range(c + 1)
]


@pytest.mark.parametrize(
    "p", MODEL[::4], ids=lambda p: f"C{p.slots}R{p.reserve}B{p.floor}s{p.s_max}so{p.s_opp}"
)
def test_no_miss_at_the_bound_and_a_miss_one_tick_below(p: ModelParams) -> None:
    bound = p.reserved_bound()
    assert find_schedule(p, "any") is not None  # the model has runs: "no miss" below is not vacuous
    for ties in ("completions-first", "any"):
        assert find_schedule(ModelParams(**{**_fields(p), "deadline": bound, "ties": ties}), "miss") is None
    tight = find_schedule(ModelParams(**{**_fields(p), "deadline": bound - 1}), "miss")
    assert tight is not None and tight.max_sojourn() == bound
    assert_agrees(tight, floor=p.floor, window=p.window, reserve=p.reserve)


def _fields(p: ModelParams) -> dict[str, object]:
    return {k: getattr(p, k) for k in ModelParams.__slots__}


@st.composite
def reserved_runs(draw: st.DrawFn) -> tuple[int, int, int, Schedule]:
    """(floor, window, reserve, schedule) simulated with a reserve, random same-tick order."""
    slots = draw(st.integers(1, 3))
    window = draw(st.integers(1, 6))
    n = draw(st.integers(1, 10))
    tenants = draw(st.lists(st.sampled_from([ASSURED, OPPORTUNISTIC]), min_size=n, max_size=n))
    reserve = draw(st.integers(0, slots - 1 if OPPORTUNISTIC in tenants else slots))
    arrivals = [draw(st.integers(0, 15) if t == ASSURED else st.integers(-3, 15)) for t in tenants]
    services = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    keys = draw(st.permutations(range(n)))
    per_window = [a // window for a, t in zip(arrivals, tenants, strict=True) if t == ASSURED]
    floor = max((per_window.count(k) for k in set(per_window)), default=1)
    order = sorted(range(n), key=lambda i: (arrivals[i], keys[i]))
    sched = simulate(slots, tenants, arrivals, services, order=order, reserve=reserve)
    return floor, window, reserve, sched


@settings(max_examples=150, deadline=None)
@given(reserved_runs())
def test_simulate_with_a_reserve_agrees_with_the_core(case: tuple[int, int, int, Schedule]) -> None:
    floor, window, reserve, sched = case
    opp = [j for j in sched.jobs if j.tenant == OPPORTUNISTIC]
    for t in {j.start for j in opp}:
        assert sum(1 for j in opp if j.start <= t < j.finish) <= sched.slots - reserve  # RB in the model
    assert_agrees(sched, floor=floor, window=window, reserve=reserve)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 2), st.data(), st.integers(1, 3), st.integers(1, 3), st.sampled_from(["miss", "any"]))
def test_z3_runs_with_a_reserve_are_simulated_runs(
    c: int, data: st.DataObject, b: int, s: int, goal: str
) -> None:
    r = data.draw(st.integers(0, c), label="reserve")
    p = ModelParams(slots=c, floor=b, window=max(2, b * s // c), s_max=s, s_opp=2, deadline=2 + s, reserve=r)
    sched = find_schedule(p, goal)
    if sched is None:
        return
    jobs = sched.jobs
    again = simulate(
        c,
        [j.tenant for j in jobs],
        [j.arrival for j in jobs],
        [j.service for j in jobs],
        order=sched.delivery(),
        reserve=r,
    )
    assert again.jobs == jobs
    assert_agrees(sched, floor=p.floor, window=p.window, reserve=r)


def test_a_reserve_of_every_slot_with_opportunistic_jobs_is_refused() -> None:
    from rvguard.errors import SpecError

    with pytest.raises(SpecError, match="no slot to opportunistic"):
        simulate(2, [ASSURED, OPPORTUNISTIC], [0, 0], [1, 1], reserve=2)
    assert simulate(2, [ASSURED], [0], [1], reserve=2).jobs[0].start == 0
    with pytest.raises(SpecError):
        ModelParams(slots=2, floor=1, window=2, s_max=1, s_opp=1, deadline=3, reserve=3)


def test_the_cli_synthesizes_the_reserve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from rvguard.cli import main

    spec = tmp_path / "c.json"
    spec.write_text(json.dumps(_contract(4, 0, 6, 0.66, 0.66, 2.5).model_dump(mode="json")))
    assert main(["verify", str(spec), "--synthesize", "reserve", "--json"]) == 1  # R = 0 misses D
    doc = json.loads(capsys.readouterr().out)
    assert (doc["synthesis"]["parameter"], doc["synthesis"]["value"]) == ("reserve", 4)
    [dl] = [o for o in doc["obligations"] if o["name"] == "deadline[a]"]
    assert "or reserve 4 of the 4 slots for floor work (reserve: 4)" in dl["message"]
    spec.write_text(json.dumps(_contract(4, 4, 6, 0.66, 0.66, 2.5).model_dump(mode="json")))
    assert main(["verify", str(spec)]) == 0  # with the reserve every obligation holds
    assert "= 1.98 s" in capsys.readouterr().out  # 12 ahead on 4 slots free at once: 0.66 + 2·0.66
