"""Keys and JWKS reloaded on SIGHUP: a key rotated without a restart, no request dropped.

The gateway binds each request with the binder current when its headers are
read; a reload builds a new binder off the event loop (the JWKS may be a URL)
and swaps it in one assignment, so requests in flight keep their tenant and
none waits. A keys file that no longer loads is logged (ERROR) and the keys
in use are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ..contract import Contract
from ..enforce.identity import Binding, Identity, IdentityBinder
from ..errors import SpecError
from .keysfile import load_keys

__all__ = ["ReloadableBinder", "SighupHandler", "on_sighup", "reload_binder"]

log = logging.getLogger("rvguard.gateway")


class ReloadableBinder(IdentityBinder):
    """An `IdentityBinder` whose keys can be swapped (``current``): the gateway and its Guard share
    one, so both bind with the keys of the last reload."""

    def __init__(self, current: IdentityBinder) -> None:  # the state is current's: no super().__init__
        self.current = current

    def bind(self, identity: Identity | None) -> Binding:
        """Bind with the current keys."""
        return self.current.bind(identity)


async def reload_binder(source: Path, contract: Contract, current: IdentityBinder) -> IdentityBinder:
    """The binder of the keys file at ``source`` as it is now, or ``current`` when it does not load."""
    try:
        keys = await asyncio.to_thread(load_keys, source)
        binder = keys.binder(contract)
    except SpecError as err:
        log.error(
            "keys not reloaded, the keys in use are kept: %s", err, extra={"event": "keys_reload_failed"}
        )
        return current
    log.info(
        "keys reloaded",
        extra={"event": "keys_reloaded", "keys": len(keys.keys), "jwt": keys.jwt is not None},
    )
    return binder


class SighupHandler:
    """Runs ``reload`` on each SIGHUP while open (one at a time); ``close`` restores the default."""

    def __init__(self, reload: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._reload = reload
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGHUP, self._fire)
            self._loop = loop

    def _fire(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._reload())

    def close(self) -> None:
        """Stop listening for SIGHUP."""
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGHUP)
            self._loop = None


def on_sighup(reload: Callable[[], Coroutine[Any, Any, None]]) -> SighupHandler:
    """Reload on SIGHUP (on the running loop, from the main thread; elsewhere: a no-op handler)."""
    return SighupHandler(reload)
