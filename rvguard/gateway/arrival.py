"""The gateway's half of a request's arrival: from a bound tenant and a checked body to the request.

What the gateway knows before the Guard sees the request: its tenant (bound on the headers), the
prompt's tokens when they are spent (token credits, a floored tenant: the upstream counts them),
its facts (`DecisionCore.facts`, read once: the output cap the edge checks ``min_tokens``
against and the weight a token-credit request must not lack are theirs), its deadline (from the
first byte) and the body the upstream will get. `Arrival.stamped` creates the `Request` from them,
complete (`BoundRequest`), in the step the Guard takes it: the Guard calls no binder, reads no facts
and makes no copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..clock import Clock
from ..contract import Contract, CreditMode
from ..enforce.entry import BoundRequest
from ..facts import FactsCache, RequestFacts
from .edge import BadRequest, Endpoint, check_min_tokens
from .wire import ForwardedContext

__all__ = ["Arrival", "PromptCounter", "deadline_of", "facts_of", "max_tokens_of"]


class PromptCounter(Protocol):
    """The upstream's ``/tokenize`` (`UpstreamDispatcher`, `FleetDispatcher`)."""

    async def count_prompt_tokens(
        self, endpoint: Endpoint, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> int:
        """The prompt's size in the upstream's tokens (raises `DispatchError` when it cannot say)."""
        ...


async def facts_of(
    facts: FactsCache,
    counter: PromptCounter,
    endpoint: Endpoint,
    body: Mapping[str, Any],
    tenant: str,
    ctx: ForwardedContext,
) -> tuple[RequestFacts, int | None]:
    """The request's facts (``facts``: the core's, read once) and its prompt's tokens when a request
    of ``tenant`` spends them (token credits, a floor: counted by the upstream).

    Raises:
        BadRequest: ``min_tokens`` above the capped output, or a floored request of 0 credits (400).
        DispatchError: the upstream cannot count the prompt.
    """
    c = facts.contract
    spent = c.credit is CreditMode.TOKENS and c.tenants[tenant].floored
    count = None
    if spent and c.token_weights.prompt > 0:
        count = await counter.count_prompt_tokens(endpoint, body, headers=ctx.headers)
    known = facts(tenant, count, max_tokens_of(body))
    check_min_tokens(body, known.capped_tokens)
    if spent and known.weight <= 0:
        raise BadRequest("this request would weigh 0 credits: it must ask for some work", code="zero_weight")
    return known, count


def deadline_of(contract: Contract, clock: Clock, tenant: str, gap: float | None) -> float | None:
    """The deadline runs from the first byte (``gap`` s ago), unless the request waited so long it
    is nearly due (or the gap is not known): then from its arrival (``None``)."""
    relative = contract.tenants[tenant].deadline
    return None if gap is None or gap > relative / 2 else clock.now() - gap + relative


@dataclass(frozen=True, slots=True)
class Arrival:
    """A request as the gateway knows it before the Guard takes it (module doc)."""

    rid: str
    facts: RequestFacts
    deadline: float | None
    prompt_tokens: int | None
    payload: Mapping[str, Any]

    def stamped(self, t: float) -> BoundRequest:
        """The request, created complete: arriving at ``t`` (the Guard's clock, read in the step
        that submits it), its tenant and capped output from the facts.

        Raises:
            EnforcementError: never for an `Arrival` made by the gateway (`BoundRequest`).
        """
        p = self.payload
        return BoundRequest.create(
            self.rid, self.facts, t, deadline=self.deadline, prompt_tokens=self.prompt_tokens, payload=p
        )


def max_tokens_of(body: Mapping[str, Any]) -> int | None:
    """The output tokens the client asked for (``max_tokens``, or chat's ``max_completion_tokens``)."""
    v = body.get("max_tokens")
    return v if v is not None else body.get("max_completion_tokens")
