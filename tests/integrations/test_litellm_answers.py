"""The LiteLLM hook answers as the gateway does, and caps as the contract does (issue 24, item 4:
one table from an outcome to its HTTP answer, one home for the cap rule). No LiteLLM needed: the
hook's logic imports nothing of it.

The expected answers are the hand-written ones of `tests.gateway.test_reasons` (docs/gateway.md),
not read from the table: a hook with a table of its own (it had one: a request held past rationed
relief's bound got 502 without a retry signal, where the gateway answers 503 and retry) fails here.
"""

from __future__ import annotations

from typing import Any

import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.outcome import Outcome
from rvguard.gateway.answers import Answers
from rvguard.integrations.litellm_hook import FloorHook, _refusal

from ..gateway._support import contract
from ..gateway.test_reasons import CASES


class _Clock:
    def now(self) -> float:
        return 0.25


@pytest.mark.parametrize(("outcome", "status", "type_", "code", "header"), CASES)
def test_the_hook_refuses_with_the_gateways_answer(
    outcome: Outcome, status: int, type_: str, code: str | None, header: str
) -> None:
    c = contract()
    refusal = _refusal(outcome, Answers(c, _Clock(), DecisionCore(c)))  # type: ignore[arg-type]
    assert refusal.status == status
    if header:
        assert any(h.startswith(header) for h in refusal.headers), refusal.headers
    else:
        assert not refusal.headers
    assert refusal.message.startswith("rvguard ")


@pytest.mark.parametrize(("asked", "sent"), [(500, 96), (7, 7), (None, 96), (True, 96)])
async def test_the_hook_forces_the_contracts_cap(asked: Any, sent: int) -> None:
    hook = FloorHook(contract(), config=_inline())
    data: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if asked is not None:
        data["max_completion_tokens"] = asked
    out = await hook._admit("assured", data)
    assert out["max_tokens"] == sent and "max_completion_tokens" not in out
    hook._ended(out, None)
    await hook.aclose()


def _inline() -> Any:
    from rvguard.enforce.guard_config import GuardConfig

    return GuardConfig(learner_timeout=None)
