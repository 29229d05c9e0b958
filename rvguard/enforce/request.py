"""The request the enforcer decides on, as the decision core and the Guard see it.

A `Request` carries the *authenticated* tenant (bound by `identity` before any
learner runs), its arrival time, an optional absolute deadline and its sizes.
The backend-facing content (prompt text or chat messages) rides in
``payload``, which the core never reads. A learner is shown `Request.read_only`:
a copy whose payload is a deep read-only copy, so what it does to what it
sees never reaches what is forwarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Request"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


@dataclass(frozen=True, slots=True)
class Request:
    """One request.

    Attributes:
        rid: unique request id (a trace's key).
        tenant: the true tenant, from authenticated identity; never from a learner.
        t: arrival time (seconds, the clock the guard runs on).
        deadline: absolute deadline; ``None`` means ``t`` + the tenant's deadline.
        prompt_tokens: prompt size, used for token credits.
        max_tokens: requested output tokens; the core forces ``min(max_tokens, output_cap)``.
        payload: what the backend needs (``{"prompt": ...}`` or ``{"messages": [...]}``).
        pool: a shared floor-credit pool's verdict on this arrival (several guard replicas):
            ``None`` no pool, ``""`` granted, else the refusal's reason (the core then grants no floor).
    """

    rid: str
    tenant: str
    t: float
    deadline: float | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    payload: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False, repr=False)
    pool: str | None = None

    def __init__(
        self,
        rid: str,
        tenant: str,
        t: float,
        deadline: float | None = None,
        prompt_tokens: int | None = None,
        max_tokens: int | None = None,
        payload: Mapping[str, Any] = _EMPTY,
        pool: str | None = None,
    ) -> None:
        # written out, as the frozen dataclass would generate it, so that the compiled build
        # (issue 16) compiles it: mypyc turns each ``object.__setattr__`` into a store
        object.__setattr__(self, "rid", rid)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "deadline", deadline)
        object.__setattr__(self, "prompt_tokens", prompt_tokens)
        object.__setattr__(self, "max_tokens", max_tokens)
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "pool", pool)

    def rebound(self, *, tenant: str, t: float, max_tokens: int | None, pool: str | None = None) -> Request:
        """A copy with the bound tenant, arrival time, capped tokens (and the pool's verdict).

        The Guard makes one per request; the constructor is several times
        cheaper than `dataclasses.replace`, which inspects the fields each call.
        """
        r = self
        verdict = r.pool if pool is None else pool
        return Request(r.rid, tenant, t, r.deadline, r.prompt_tokens, max_tokens, r.payload, verdict)

    def read_only(self) -> Request:
        """A copy for an untrusted reader (a learner): mappings become read-only proxies of new
        dicts and lists tuples, all the way down, so nothing it does reaches this request.

        Raises:
            RecursionError: a payload nested deeper than the interpreter's limit.
        """
        frozen = self.payload if self.payload is _EMPTY else _frozen(self.payload)
        r = self
        return Request(r.rid, r.tenant, r.t, r.deadline, r.prompt_tokens, r.max_tokens, frozen, r.pool)


def _frozen(value: Any) -> Any:
    """A deep read-only copy of a JSON-like value (strings and numbers are immutable already)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value
