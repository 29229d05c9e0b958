"""Request facts: one definition, one cache, and the column form equal to it row by row."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.contract import Contract, contract_from_mapping
from rvguard.errors import UnknownTenantError
from rvguard.fact_columns import fact_columns
from rvguard.facts import FactsCache, RequestFacts, request_facts

NAMES = ("gold", "opp", "free")


@st.composite
def contracts(draw: st.DrawFn) -> Contract:
    credit = draw(st.sampled_from(["count", "tokens"]))
    per_token = st.sampled_from([0.0, 0.0149, 0.1, 1 / 3])
    base = draw(st.sampled_from([0.0, 0.183, 0.3]))
    upper = draw(st.one_of(st.none(), st.just({"base": 0.7, "per_token": 0.5})))
    lower = {"base": base, "per_token": draw(per_token)}
    floor = st.sampled_from([0, 1, 6]) if credit == "count" else st.sampled_from([0, 0.3, 12.5])
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "output_cap": draw(st.integers(1, 64)),
            "credit": credit,
            "token_weights": {"prompt": draw(st.sampled_from([0.0, 0.1, 1.0])), "output": 0.07},
            "service": {"s_max": 100.0, "lower": lower, "upper": upper},
            "tenants": {
                n: {"floor": draw(floor), "deadline": draw(st.sampled_from([0.5, 1.82])), "tier": i}
                for i, n in enumerate(NAMES)
            },
        }
    )


shapes = st.tuples(
    st.sampled_from(NAMES),
    st.floats(0.0, 100.0),
    st.one_of(st.none(), st.floats(0.0, 200.0)),
    st.one_of(st.none(), st.integers(0, 5000)),
    st.one_of(st.none(), st.integers(0, 200)),
)


def _same(a: float | None, b: Any) -> bool:
    return (a is None and math.isnan(b)) or a == b


@settings(max_examples=150, deadline=None)
@given(contracts(), st.lists(shapes, min_size=1, max_size=20))
def test_the_columns_are_the_facts_row_by_row(contract: Contract, rows: list[tuple[Any, ...]]) -> None:
    codes = np.array([NAMES.index(r[0]) for r in rows])
    cols = fact_columns(
        contract,
        NAMES,
        codes,
        np.array([r[1] for r in rows]),
        np.array([np.nan if r[2] is None else r[2] for r in rows]),
        np.array([-1 if r[3] is None else r[3] for r in rows], dtype=np.int64),
        np.array([-1 if r[4] is None else r[4] for r in rows], dtype=np.int64),
    )
    for i, (tenant, t, deadline, prompt, max_tokens) in enumerate(rows):
        f = request_facts(contract, tenant, prompt, max_tokens)
        assert cols.relative_deadline[i] == f.relative_deadline
        assert cols.deadline[i] == f.deadline(t, deadline)
        assert cols.capped_tokens[i] == f.capped_tokens
        assert cols.lower[i] == f.lower
        assert _same(f.upper, cols.upper[i])
        assert cols.weight[i] == f.weight and cols.weight_units[i] == f.weight_units
        assert (cols.floored[i], cols.tier[i]) == (f.floored, f.tier)


def test_facts_read_the_contract(marquee: Contract) -> None:
    f = request_facts(marquee, "assured", 7, 100)
    assert f == RequestFacts("assured", 1.82, 48, 0.236, None, 1.0, True, 0)
    assert f.deadline(2.0) == 2.0 + 1.82 and f.deadline(2.0, 3.5) == 3.5
    assert request_facts(marquee, "opportunistic", None, None).floored is False


def test_the_cache_computes_each_shape_once_and_stays_bounded(marquee: Contract) -> None:
    cache = FactsCache(marquee, size=2)
    first = cache("assured", None, 16)
    assert cache("assured", None, 16) is first
    cache("assured", None, 17)
    cache("assured", None, 18)  # beyond the bound: computed, not kept
    assert cache("assured", None, 18) == cache("assured", None, 18)
    assert cache("assured", None, 18) is not cache("assured", None, 18)


def test_an_unknown_tenant_is_named(marquee: Contract) -> None:
    with pytest.raises(UnknownTenantError, match="tenant 'mallory' is not in the contract") as err:
        FactsCache(marquee)("mallory", None, None)
    assert err.value.field == "tenant"
