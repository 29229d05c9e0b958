"""The gateway's readiness: its probe of the upstream, and what ``/readyz`` answers.

Theory of operation
-------------------
Every ``probe_interval`` seconds the gateway probes its upstream
(`rvguard.gateway.outlier.probe`: the health path when one is set, then ``GET /v1/models``,
whose list the gateway checks each request's ``model`` against); a fleet probes each
engine (`FleetDispatcher.models`). A probe that fails, or takes longer than
`PROBE_TIMEOUT_S`, makes the upstream unreachable; a change is logged
(``upstream_down`` / ``upstream_up``) and shown as ``rvguard_upstream_up``.

``/readyz`` answers 200 when the gateway serves, the upstream answered its last probe
*and* is not ejected for failed requests (`rvguard.gateway.outlier`: a single upstream
that is out, or a fleet whose engines are all out of rotation), the trace is being
written and, with a shared pool, the replica pools; else 503 naming each failing check,
with the reason for ``upstream`` and ``credits``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response

from ..errors import DispatchError
from .fleet import FleetDispatcher
from .outlier import probe
from .wire import error_body

if TYPE_CHECKING:
    from ..fleet.credits import SharedCredits
    from .prometheus import MetricsSink
    from .trace import TraceFile
    from .upstream import UpstreamDispatcher

__all__ = ["PROBE_TIMEOUT_S", "Readiness"]

log = logging.getLogger("rvguard.gateway")
#: seconds a readiness probe of the upstream may take before the upstream counts as down
PROBE_TIMEOUT_S = 2.0


class Readiness:
    """The upstream's reachability, probed (module doc); `readyz` answers ``/readyz``.

    Args:
        dispatcher: the gateway's upstream (one engine) or fleet.
        metrics: the gateway's metrics (``rvguard_upstream_up``).
    """

    def __init__(self, dispatcher: UpstreamDispatcher | FleetDispatcher, metrics: MetricsSink) -> None:
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.models: frozenset[str] = frozenset()
        self.upstream_up = False
        self._probed = False

    async def probe(self) -> None:
        """Probe the upstream once; log when its reachability changes."""
        d = self.dispatcher
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                got = await (d.models() if isinstance(d, FleetDispatcher) else probe(d))
            self.models = frozenset(got)
        except (DispatchError, TimeoutError) as err:
            if self.upstream_up or not self._probed:
                why = str(err) or "no answer within the probe timeout"
                log.warning("upstream unreachable: %s", why, extra={"event": "upstream_down"})
            self.upstream_up = False
        else:
            if not self.upstream_up:
                models = ",".join(sorted(self.models))
                log.info("upstream reachable", extra={"event": "upstream_up", "models": models})
            self.upstream_up = True
        self._probed = True
        self.metrics.upstream_up.set(float(self.upstream_up))

    async def loop(self, interval: float) -> None:
        """Probe every ``interval`` seconds, the first at once."""
        while True:
            await self.probe()
            await asyncio.sleep(interval)

    def ejected(self) -> str:
        """Why the upstream is out for failed requests (``""``: it is not)."""
        d = self.dispatcher
        if isinstance(d, FleetDispatcher):
            if any(e.in_rotation for e in d.engines):
                return ""
            out = [(e.name, o) for e in d.engines if (o := e.dispatcher.outlier) is not None and o.ejected]
            said = "; ".join(f"engine {name} ejected: {o.reason}" for name, o in out)
            return said or "no engine in rotation"
        o = d.outlier
        return f"ejected: {o.reason}" if o is not None and o.ejected else ""

    def readyz(self, serving: bool, trace: TraceFile | None, credits: SharedCredits | None) -> Response:
        """``/readyz``'s answer (module doc)."""
        ejected = self.ejected()
        checks = {
            "serving": serving,
            "upstream": self.upstream_up and not ejected,
            "trace": trace is None or not trace.failing,
        }
        pool = "" if credits is None else credits.readiness()
        if credits is not None:
            checks["credits"] = not pool
        if all(checks.values()):
            return JSONResponse({"status": "ready", "checks": checks})
        why = {"credits": pool, "upstream": ejected}
        failing = [f"{n} ({why[n]})" if why.get(n) else n for n, ok in checks.items() if not ok]
        body: dict[str, Any] = error_body(
            f"not ready: {', '.join(failing)}", "service_unavailable_error", code="not_ready"
        )
        return JSONResponse({**body, "checks": checks}, status_code=503)
