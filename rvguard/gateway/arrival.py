"""The gateway's half of a request's arrival: from a bound tenant and a checked body to the request.

What the gateway knows before the Guard sees the request: its tenant (bound on the headers), the
prompt's tokens when they are spent (token credits, a floored tenant: the upstream counts them),
its deadline (from the first byte) and the body the upstream will get.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..clock import Clock
from ..contract import Contract, CreditMode
from ..enforce.request import Request
from .edge import BadRequest, Endpoint
from .wire import ForwardedContext

__all__ = ["PromptCounter", "deadline_of", "max_tokens_of", "prompt_tokens", "request_of"]


class PromptCounter(Protocol):
    """The upstream's ``/tokenize`` (`UpstreamDispatcher`, `FleetDispatcher`)."""

    async def count_prompt_tokens(
        self, endpoint: Endpoint, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> int:
        """The prompt's size in the upstream's tokens (raises `DispatchError` when it cannot say)."""
        ...


async def prompt_tokens(
    contract: Contract,
    counter: PromptCounter,
    endpoint: Endpoint,
    body: Mapping[str, Any],
    tenant: str,
    ctx: ForwardedContext,
) -> int | None:
    """The prompt's tokens when a request of ``tenant`` spends them (token credits, a floor).

    Raises:
        BadRequest: the request would weigh 0 credits (400).
        DispatchError: the upstream cannot count the prompt.
    """
    c = contract
    spec = c.tenants[tenant]
    if c.credit is not CreditMode.TOKENS or not spec.floored:
        return None
    count = None
    if c.token_weights.prompt > 0:
        count = await counter.count_prompt_tokens(endpoint, body, headers=ctx.headers)
    if c.weight(count, max_tokens_of(body)) <= 0:
        raise BadRequest("this request would weigh 0 credits: it must ask for some work", code="zero_weight")
    return count


def deadline_of(contract: Contract, clock: Clock, tenant: str, gap: float | None) -> float | None:
    """The deadline runs from the first byte (``gap`` s ago), unless the request waited so long it
    is nearly due (or the gap is not known): then from its arrival (``None``)."""
    relative = contract.tenants[tenant].deadline
    return None if gap is None or gap > relative / 2 else clock.now() - gap + relative


def request_of(
    rid: str,
    tenant: str,
    deadline: float | None,
    prompt: int | None,
    body: Mapping[str, Any],
    payload: Mapping[str, Any],
) -> Request:
    """The request as the gateway knows it (the Guard stamps the arrival and caps the output)."""
    return Request(rid, tenant, 0.0, deadline, prompt, max_tokens_of(body), payload=payload)


def max_tokens_of(body: Mapping[str, Any]) -> int | None:
    """The output tokens the client asked for (``max_tokens``, or chat's ``max_completion_tokens``)."""
    v = body.get("max_tokens")
    return v if v is not None else body.get("max_completion_tokens")
