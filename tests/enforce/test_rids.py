"""SpentRids: the same answers as a plain set, in far less memory for counters."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.enforce.rids import SpentRids

rids = st.one_of(
    st.builds(lambda p, n: f"{p}{n}", st.sampled_from(["g", "r", "", "a-0", "x9y"]), st.integers(0, 40)),
    st.sampled_from(["g07", "g00", "r0", "0", "00", "g" + "9" * 25, "uuid-4b2c", "", "é1", "g-1"]),
    st.text(max_size=6),
)


@given(st.lists(rids, max_size=80), st.lists(rids, max_size=20))
@settings(max_examples=300)
def test_answers_like_a_set(added: list[str], probes: list[str]) -> None:
    spent, plain = SpentRids(), set()
    for rid in added:
        spent.add(rid)
        plain.add(rid)
        assert rid in spent
        assert len(spent) == len(plain)
    for rid in added + probes:
        assert (rid in spent) == (rid in plain), rid


def test_a_counter_spent_roughly_in_order_costs_constant_memory() -> None:
    rng = random.Random(5)
    order = list(range(100_000))
    for i in range(0, len(order), 64):  # requests end out of order within a window of 64
        chunk = order[i : i + 64]
        rng.shuffle(chunk)
        order[i : i + 64] = chunk
    spent = SpentRids()
    for n in order:
        spent.add(f"g{n}")
    strings, strays = spent.footprint()
    assert len(spent) == 100_000
    assert strings + strays <= 128
    assert "g99999" in spent and "g100000" not in spent and "g099" not in spent


def test_unrelated_rids_are_kept_as_strings() -> None:
    spent = SpentRids()
    for rid in ("a3", "b7", "c12"):
        spent.add(rid)
    assert spent.footprint() == (3, 0)
    assert "a4" not in spent and "a3" in spent
