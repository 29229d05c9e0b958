"""The floor in front of a LiteLLM proxy's deployments, as a LiteLLM callback (``rvguard[litellm]``).

LiteLLM's proxy authenticates the caller, then runs each callback's ``async_pre_call_hook``
before it routes the call to a deployment. `FloorHook` makes that hook the Guard's admission and
dispatch: the request is submitted to a `Guard` whose dispatcher is a *hand-off* — when the Guard
grants the request a slot (its ``dispatch`` event), the hook returns and LiteLLM makes the call;
when LiteLLM reports the call's end (success, stream end, failure), the hand-off returns and the
Guard records ``complete`` or ``fail`` and frees the slot. So the Guard's rules hold unchanged:
the tenant comes from LiteLLM's authentication (never from the body or the learner), entitled
requests are admitted whatever the learner says, at most C calls are in flight, dispatch is
assured-first, the output cap is forced on ``max_tokens``, and every event goes to the trace that
``rvguard check`` judges. A refused request gets LiteLLM's error with the gateway's own answer:
the status and retry headers of `rvguard.gateway.reasons`' one table (429 with ``retry-after`` to
the next window, 503 with ``x-should-retry`` for a preempted or held request, 401, …).

The hook's logic imports nothing from LiteLLM; `make_callback` mixes it into LiteLLM's
``CustomLogger`` (which the proxy requires of a callback) when LiteLLM is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..contract import Contract, CreditMode
from ..enforce.dispatchers import Response
from ..enforce.guard import DEFAULT_CONFIG, Guard, Outcome
from ..enforce.guard_config import GuardConfig
from ..enforce.request import Request
from ..errors import DispatchError
from ..gateway.answers import Answers

__all__ = ["FloorHook", "HookSettings", "Refusal", "make_callback"]

#: the LiteLLM hooks `FloorHook` defines
_HOOKS = (
    "async_pre_call_hook",
    "async_post_call_success_hook",
    "async_post_call_failure_hook",
    "async_post_call_streaming_iterator_hook",
)
#: where LiteLLM's authenticated identity names the tenant (`UserAPIKeyAuth` attributes)
TENANT_FIELDS = ("team_alias", "team_id", "key_alias", "user_id")


@dataclass(frozen=True)
class HookSettings:
    """How the hook binds a tenant and what it does with an unknown one.

    Attributes:
        tenant_field: the attribute of LiteLLM's ``UserAPIKeyAuth`` that names the contract tenant
            (``team_alias`` by default: LiteLLM's teams are the natural tenants).
        unknown: ``reject`` (401: an identity the contract does not know never gets a floor) or the
            name of an unfloored tenant that serves it.
        dispatch_timeout: seconds LiteLLM may take to report a call's end before the Guard fails it
            and frees its slot (a call whose end LiteLLM never reports must not hold a slot forever).
    """

    tenant_field: str = "team_alias"
    unknown: str = "reject"
    dispatch_timeout: float = 600.0


class Refusal(Exception):
    """The Guard refused a request: the HTTP status, a message and headers for LiteLLM's answer."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers)


class _Handoff:
    """The Guard's dispatcher: signals "go" to the waiting hook, then waits for LiteLLM's end."""

    def __init__(self) -> None:
        self.granted: dict[str, asyncio.Future[None]] = {}
        self._ends: dict[str, asyncio.Future[Response]] = {}

    async def dispatch(self, request: Request) -> Response:
        """Hand the slot to LiteLLM's call and wait until it ends."""
        end: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._ends[request.rid] = end
        granted = self.granted.pop(request.rid, None)
        if granted is not None and not granted.done():
            granted.set_result(None)
        try:
            return await end
        finally:
            self._ends.pop(request.rid, None)

    def end(self, rid: str, error: BaseException | None = None) -> bool:
        """LiteLLM's call for ``rid`` ended (``error`` when it failed); False if none was running."""
        end = self._ends.get(rid)
        if end is None or end.done():
            return False
        if error is None:
            end.set_result(Response())
        else:
            end.set_exception(error)
        return True


class FloorHook:
    """The Guard as LiteLLM's pre-call hook (see the module doc); one per proxy process.

    Args:
        contract: the contract to enforce.
        sinks: where the Guard's events go (e.g. a `rvguard.enforce.sinks.JsonlSink` trace).
        settings: tenant binding and the dispatch time-out (which overrides ``config.timeout``).
        config: the Guard's settings (`GuardConfig`: watch, learner time-out, …).
        guard_options: further `Guard` collaborators (learner, clock, …).
    """

    def __init__(
        self,
        contract: Contract,
        *,
        sinks: Sequence[Callable[[Any], object]] = (),
        settings: HookSettings | None = None,
        config: GuardConfig = DEFAULT_CONFIG,
        **guard_options: Any,
    ) -> None:
        self.contract = contract
        self.settings = settings if settings is not None else HookSettings()
        if self.settings.tenant_field not in TENANT_FIELDS:
            raise ValueError(
                f"tenant_field must be one of {TENANT_FIELDS}, got {self.settings.tenant_field!r}"
            )
        unknown = self.settings.unknown
        if unknown != "reject" and (unknown not in contract.tenants or contract.tenants[unknown].floored):
            raise ValueError(
                f"unknown must be 'reject' or an unfloored tenant of the contract, got {unknown!r}"
            )
        self._handoff = _Handoff()
        self._sinks = list(sinks)
        self._config = replace(config, timeout=self.settings.dispatch_timeout)
        self._options = guard_options
        self._guard: Guard | None = None
        self._calls: dict[str, asyncio.Task[Outcome]] = {}

    async def guard(self) -> Guard:
        """The Guard, opened on first use inside the proxy's event loop."""
        if self._guard is None:
            guard = Guard(
                self.contract,
                self._handoff,
                sinks=self._sinks,
                config=self._config,
                **self._options,
            )
            await guard.__aenter__()
            self._guard = guard
        return self._guard

    async def aclose(self) -> None:
        """Close the Guard (drains live calls, closes the sinks)."""
        if self._guard is not None:
            await self._guard.aclose()

    def tenant_of(self, identity: object) -> str:
        """The contract tenant LiteLLM's authenticated ``identity`` names (`HookSettings`).

        Raises:
            Refusal: 401 when it names no tenant of the contract and unknown identities are refused.
        """
        name = getattr(identity, self.settings.tenant_field, None)
        if isinstance(name, str) and name in self.contract.tenants:
            return name
        if self.settings.unknown == "reject":
            raise Refusal(401, f"rvguard: {self.settings.tenant_field} names no tenant of the contract", {})
        return self.settings.unknown

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        """Admit and wait for a slot; return ``data`` (output cap forced) to let LiteLLM call."""
        if not isinstance(data, dict) or call_type not in ("completion", "text_completion", "acompletion"):
            return data
        try:
            tenant = self.tenant_of(user_api_key_dict)
            return await self._admit(tenant, data)
        except Refusal as refusal:
            raise _http_exception(refusal) from None

    async def _admit(self, tenant: str, data: dict[str, Any]) -> dict[str, Any]:
        guard = await self.guard()
        rid = f"litellm-{uuid.uuid4().hex}"
        asked = data.get("max_tokens") or data.get("max_completion_tokens")
        known = asked if isinstance(asked, int) and not isinstance(asked, bool) else None
        max_tokens = self.contract.capped_tokens(known)  # the cap rule's one home
        request = Request(
            rid,
            tenant,
            guard.clock.now(),
            prompt_tokens=_prompt_tokens(self.contract, data),
            max_tokens=max_tokens,
        )
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._handoff.granted[rid] = granted
        call = asyncio.create_task(guard.submit(request))
        self._calls[rid] = call
        call.add_done_callback(lambda _t: self._calls.pop(rid, None))
        try:
            waiting: set[asyncio.Future[Any]] = {granted, call}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the client went away while waiting: the Guard ends it
            call.cancel()
            raise
        finally:
            self._handoff.granted.pop(rid, None)
        if not granted.done():
            raise _refusal(call.result(), Answers(self.contract, guard.clock, guard.core))
        data["max_tokens"] = max_tokens
        data.pop("max_completion_tokens", None)
        data.setdefault("metadata", {})["rvguard_rid"] = rid
        return data

    def _ended(self, data: Any, error: BaseException | None) -> None:
        rid = _rid_of(data)
        if rid is not None:
            self._handoff.end(rid, error)

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """A non-streamed call ended well: the Guard records ``complete``."""
        self._ended(data, None)
        return response

    async def async_post_call_failure_hook(
        self, request_data: dict[str, Any], original_exception: Exception, user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> Any:  # fmt: skip
        """The call failed (an upstream 4xx is the client's fault, as the gateway records it)."""
        self._ended(request_data, _as_dispatch_error(original_exception))
        return None

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncIterator[Any]:
        """Relay a stream; its end (or a client hang-up, or an error) ends the request."""
        error: BaseException | None = None
        try:
            async for item in response:
                yield item
        except GeneratorExit:
            error = DispatchError(
                "the client closed the stream", status_hint=499, reason="client-error: disconnect"
            )
            raise
        except Exception as exc:
            error = _as_dispatch_error(exc)
            raise
        finally:
            self._ended(request_data, error)


def _rid_of(data: Any) -> str | None:
    metadata = data.get("metadata") if isinstance(data, Mapping) else None
    rid = metadata.get("rvguard_rid") if isinstance(metadata, Mapping) else None
    return rid if isinstance(rid, str) else None


def _prompt_tokens(contract: Contract, data: Mapping[str, Any]) -> int | None:
    """The prompt's size when credits are tokens (LiteLLM's own counter for the model), else None."""
    if contract.credit is not CreditMode.TOKENS:
        return None
    import litellm

    messages = data.get("messages")
    text = data.get("prompt")
    with contextlib.suppress(Exception):  # an uncountable prompt counts as the minimum, 1 token
        return max(
            1, int(litellm.token_counter(model=str(data.get("model", "")), messages=messages, text=text))
        )
    return 1


def _as_dispatch_error(exc: BaseException) -> BaseException:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
        return DispatchError(str(exc), status_hint=status, reason=f"client-error: http {status}")
    return exc


def _refusal(outcome: Outcome, answers: Answers) -> Refusal:
    """The answer the gateway gives for ``outcome``: its status and retry headers from the one table
    (`rvguard.gateway.reasons`, through `Answers.failure`), the error's message as LiteLLM's detail."""
    status, body, headers = answers.failure(outcome)
    message = body.get("error", {}).get("message") or outcome.status
    return Refusal(status, f"rvguard {message}", headers)


def _http_exception(refusal: Refusal) -> Exception:
    from fastapi import HTTPException

    exc: Exception = HTTPException(
        status_code=refusal.status, detail=refusal.message, headers=refusal.headers
    )
    return exc


def make_callback(contract: Contract, **options: Any) -> Any:
    """A `FloorHook` that is also LiteLLM's ``CustomLogger``, as the proxy's ``callbacks`` need.

    Raises:
        ImportError: LiteLLM is not installed (``pip install 'rvguard[litellm]'``).
    """
    from litellm.integrations.custom_logger import CustomLogger

    # LiteLLM calls a hook only when the callback's own class defines it (``vars(cls)``), so the
    # hooks are copied into the new class rather than inherited from the mixin
    hooks = {name: FloorHook.__dict__[name] for name in _HOOKS}
    cls = type("RvguardFloor", (FloorHook, CustomLogger), hooks)

    def init(self: Any, contract: Contract, **options: Any) -> None:
        CustomLogger.__init__(self)
        FloorHook.__init__(self, contract, **options)

    cls.__init__ = init  # type: ignore[misc]
    return cls(contract, **options)
