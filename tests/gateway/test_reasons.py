"""The one table from an outcome's reason to its HTTP answer (`rvguard.gateway.reasons`).

The expected answers are written out by hand from the gateway's documented behaviour
(docs/gateway.md, `rvguard.gateway.answers`' module doc), not read from the table.
"""

from __future__ import annotations

from typing import Any

import pytest

from rvguard.enforce.core import DecisionCore
from rvguard.enforce.outcome import Outcome
from rvguard.errors import DispatchError, EnforcementError
from rvguard.gateway.answers import Answers
from rvguard.gateway.reasons import ANSWERS, Reason, classify

from ._support import contract


class _Clock:
    def now(self) -> float:
        return 0.25  # a quarter into the first 1 s window


def _answers() -> Answers:
    c = contract()
    return Answers(c, _Clock(), DecisionCore(c))  # type: ignore[arg-type]


def _up(hint: int, error: Any = None) -> DispatchError:
    return DispatchError("upstream said no", status_hint=hint, error=error)


_O, _U, _E = Outcome, "service_unavailable_error", "upstream_error"
#: outcome → (status, OpenAI type, code, a header the answer must carry or "" for none)
CASES: list[tuple[Outcome, int, str, str | None, str]] = [
    (_O("r", "rejected", "unauthenticated"), 401, "authentication_error", "invalid_api_key", "www-auth"),
    (_O("r", "rejected", "floor-lowered"), 429, "rate_limit_error", "floor-lowered", "retry-after-ms"),
    (_O("r", "rejected"), 429, "rate_limit_error", "rejected", "retry-after"),
    (_O("r", "preempted", "preempted", retry_after=2.5), 503, _U, "preempted", "x-should-retry"),
    (_O("r", "dropped", "doomed"), 503, _U, "doomed", "x-should-retry"),
    (_O("r", "failed", "timeout"), 504, _E, "timeout", ""),
    (_O("r", "failed", "x", error=TimeoutError()), 504, _E, "timeout", ""),
    (_O("r", "failed", "client-error", error=_up(400)), 400, "invalid_request_error", None, "x-should"),
    (_O("r", "failed", "", error=_up(403)), 502, _E, "upstream_auth", ""),
    (_O("r", "failed", "", error=_up(429)), 503, _E, "upstream_failed", ""),
    (_O("r", "failed", "", error=_up(504)), 504, _E, "timeout", ""),
    (_O("r", "failed", "", error=_up(500)), 502, _E, "upstream_failed", ""),
    (_O("r", "failed", "hold-bound"), 503, _U, "hold-bound", "x-should-retry"),
    (_O("r", "failed", "redline-stale"), 503, _U, "redline-stale", "retry-after"),
    (_O("r", "failed", "shutdown"), 503, _U, "shutdown", "retry-after"),
    (_O("r", "failed", "cancelled"), 503, _U, "cancelled", "retry-after"),
    (_O("r", "failed", "closed", error=EnforcementError("closed")), 503, _U, "unavailable", "retry-after"),
    (_O("r", "failed", "RuntimeError: boom", error=RuntimeError("boom")), 502, _E, "upstream_failed", ""),
]  # fmt: skip


@pytest.mark.parametrize(("outcome", "status", "type_", "code", "header"), CASES)
def test_each_outcome_gets_its_documented_answer(
    outcome: Outcome, status: int, type_: str, code: str | None, header: str
) -> None:
    got, body, headers = _answers().failure(outcome)
    assert (got, body["error"]["type"], body["error"]["code"]) == (status, type_, code)
    if header:
        assert any(h.startswith(header) for h in headers)
    else:
        assert not headers


def test_every_reason_has_a_row_and_is_reachable() -> None:
    assert set(ANSWERS) == set(Reason)
    assert {classify(o) for o, *_ in CASES} == set(Reason)  # the cases above cover the whole table


def test_the_upstream_own_error_object_is_relayed_as_it_came() -> None:
    own = {"message": "bad field", "type": "BadRequestError", "param": "temperature", "code": 400}
    status, body, headers = _answers().failure(
        Outcome("r", "failed", "client-error: http 400", error=_up(400, own))
    )
    assert (status, body["error"], headers["x-should-retry"]) == (400, own, "false")


def test_a_rejection_waits_for_the_next_window_and_a_preemption_for_its_hint() -> None:
    _s, _b, rejected = _answers().failure(Outcome("r", "rejected", "floor-lowered"))
    assert rejected["retry-after-ms"] == "750"  # 0.25 s into a 1 s window
    _s, _b, preempted = _answers().failure(Outcome("r", "preempted", "preempted", retry_after=2.5))
    assert (preempted["retry-after-ms"], preempted["x-should-retry"]) == ("2500", "true")


def test_the_log_line_follows_the_table() -> None:
    expected = {
        Reason.UNAUTHENTICATED: "refused",
        Reason.REJECTED: "refused",
        Reason.DROPPED: "refused",
        Reason.PREEMPTED: "preempted",
        Reason.UPSTREAM_CLIENT: "client_error",
    }
    for reason, spec in ANSWERS.items():
        assert spec.log == expected.get(reason, "upstream_failed"), reason
