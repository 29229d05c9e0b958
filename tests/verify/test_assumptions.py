"""Every obligation names its assumptions; the one the run time could break (w_min) is enforced."""

from __future__ import annotations

import numpy as np

from rvguard.contract import contract_from_mapping
from rvguard.fact_columns import fact_columns
from rvguard.facts import request_facts
from rvguard.verify.encoding import VerifyOptions
from rvguard.verify.preconditions import verify_contract

TOKENS = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 2,
        "credit": "tokens",
        "output_cap": 8,
        "token_weights": {"prompt": 1.0, "output": 2.0},
        "service": {"s_max": 0.1, "s_max_opp": 0.1},
        "tenants": {"a": {"floor": 6.0, "deadline": 9.0}, "o": {"floor": 0, "deadline": 9.0, "tier": 1}},
    }
)


def test_every_obligation_names_its_assumptions() -> None:
    for options in (VerifyOptions(), VerifyOptions(backlog_assumption=True)):
        results = {r.name: r for r in verify_contract(TOKENS, options=options)}
        keys = {name: {a.split(":", 1)[0] for a in r.assumptions} for name, r in results.items()}
        assert {"A2 dispatch", "A3 envelope", "A1 credits", "w_min", "cap"} <= keys["deadline[a]"]
        assert ("backlog" in keys["deadline[a]"]) is options.backlog_assumption
        assert ("induction" in keys["deadline[a]"]) is not options.backlog_assumption
        assert "w_min" in keys["credit_bound"] and "DR" in keys["dr_soundness"]
        assert all(results[n].to_json()["assumptions"] == list(results[n].assumptions) for n in results)


def test_a_request_without_a_prompt_size_is_charged_the_minimum_verify_assumes() -> None:
    """verify bounds a window's requests by ⌊B / w_min⌋, w_min = 1·1 + 2·1 = 3: ⌊6/3⌋ = 2 entitled."""
    w_min = 1 * VerifyOptions().min_prompt_tokens + 2 * VerifyOptions().min_output_tokens
    for prompt, max_tokens in ((None, None), (0, 1), (None, 0), (0, 0)):
        facts = request_facts(TOKENS, "a", prompt, max_tokens)
        assert facts.weight >= w_min, (prompt, max_tokens, facts.weight)
    cols = fact_columns(
        TOKENS,
        ("a",),
        np.array([0, 0]),
        np.array([0.0, 0.1]),
        np.array([np.nan, np.nan]),
        np.array([-1, 5]),  # -1: not given
        np.array([0, 0]),
    )
    assert list(cols.weight) == [3.0, 7.0]  # 1·max(0, 1) + 2·max(0, 1); 1·5 + 2·1
