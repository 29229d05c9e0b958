"""The LiteLLM proxy's entry points, configured from the environment (``rvguard[litellm]``).

In the proxy's ``config.yaml``::

    litellm_settings:
      callbacks: rvguard.integrations.litellm_proxy.handler
    general_settings:
      master_key: os.environ/LITELLM_MASTER_KEY
      custom_auth: rvguard.integrations.litellm_proxy.user_api_key_auth   # optional, see below

and in its environment: ``RVGUARD_CONTRACT`` (the contract file, required), ``RVGUARD_TRACE`` (the
trace to write, unbuffered; on a restart a new segment, as ``rvguard serve`` does),
``RVGUARD_TENANT_FIELD`` (which attribute of LiteLLM's authenticated key names the tenant:
``team_alias`` by default, or ``team_id``, ``key_alias``, ``user_id``), ``RVGUARD_UNKNOWN``
(``reject``, or an unfloored tenant that serves identities the contract does not know),
``RVGUARD_DISPATCH_TIMEOUT`` (seconds).

``user_api_key_auth`` is for proxies without LiteLLM's key database: it binds the bearer key
through rvguard's own keys file (``RVGUARD_KEYS``) and hands LiteLLM an identity whose team is the
tenant. With LiteLLM's virtual keys, leave it out and give each tenant's keys a team.
"""

from __future__ import annotations

import os
from typing import Any

from ..clock import MonotonicClock
from ..contract import load_contract
from ..enforce.identity import Identity
from ..errors import SpecError
from ..gateway.trace import TraceFile, existing_trace
from .litellm_hook import HookSettings, make_callback

__all__ = ["handler", "user_api_key_auth"]


def _settings() -> HookSettings:
    timeout = os.environ.get("RVGUARD_DISPATCH_TIMEOUT")
    try:
        seconds = HookSettings.dispatch_timeout if timeout is None else float(timeout)
    except ValueError:
        raise SpecError(
            f"RVGUARD_DISPATCH_TIMEOUT must be seconds, got {timeout!r}", field="RVGUARD_DISPATCH_TIMEOUT"
        ) from None
    return HookSettings(
        tenant_field=os.environ.get("RVGUARD_TENANT_FIELD", HookSettings.tenant_field),
        unknown=os.environ.get("RVGUARD_UNKNOWN", HookSettings.unknown),
        dispatch_timeout=seconds,
    )


def _build() -> Any:
    path = os.environ.get("RVGUARD_CONTRACT")
    if not path:
        raise SpecError("RVGUARD_CONTRACT must name the contract file", field="RVGUARD_CONTRACT")
    trace = os.environ.get("RVGUARD_TRACE")
    prior = existing_trace(trace) if trace else None  # a restart continues the first run's timeline
    clock = MonotonicClock() if prior is None else MonotonicClock.since(prior[0].origin)
    sinks = [] if not trace else [TraceFile(trace, clock)]  # unbuffered; a restart opens a new segment
    try:
        return make_callback(load_contract(path), sinks=sinks, settings=_settings(), clock=clock)
    except ValueError as err:
        raise SpecError(f"rvguard's LiteLLM hook: {err}", field="RVGUARD_TENANT_FIELD") from None


#: the callback instance LiteLLM's ``callbacks`` names
handler = _build()
_binders: dict[str, Any] = {}  # the keys file's binder and the (path, mtime) it was read at


async def user_api_key_auth(request: Any, api_key: str) -> Any:
    """LiteLLM's ``custom_auth``: the bearer key bound by rvguard's keys file (``RVGUARD_KEYS``).

    Raises:
        fastapi.HTTPException: 401 when the key binds no tenant.
    """
    from fastapi import HTTPException
    from litellm.proxy._types import UserAPIKeyAuth

    from ..gateway.config import load_keys

    keys = os.environ.get("RVGUARD_KEYS")
    if not keys:
        raise SpecError("RVGUARD_KEYS must name rvguard's keys file for custom_auth", field="RVGUARD_KEYS")
    stamp = (keys, os.stat(keys).st_mtime_ns)  # re-read when the file changes (keys rotated)
    if _binders.get("stamp") != stamp:
        _binders.update(stamp=stamp, binder=load_keys(keys).binder(handler.contract))
    token = api_key.removeprefix("Bearer ").strip()
    binding = _binders["binder"].bind(Identity(api_key=token))
    if not binding.authenticated or binding.tenant is None:
        raise HTTPException(status_code=401, detail=f"rvguard: {binding.reason}")
    return UserAPIKeyAuth(api_key=token, team_id=binding.tenant, team_alias=binding.tenant)
