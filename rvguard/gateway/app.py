"""The guarded OpenAI-compatible gateway: a Starlette ASGI app around one `Guard`.

Theory of operation
-------------------
A completion request is handled in this order, so that nothing a client
controls costs more than its credentials allow:

1. its request id and trace context are taken or made (`wire.forwarded_context`),
   and returned (``x-request-id``) on every answer, errors included;
2. the tenant is bound from the headers alone (`config`; an unknown or missing
   key is refused 401 by default) — before a byte of the body is read;
3. the body is read within ``max_body`` and ``body_timeout``, parsed strictly
   and checked (`edge`): a client's mistake is a 400 (413, 408) that spends no
   credit and leaves no trace event;
4. with token credits, the prompt is counted by the upstream (``/tokenize``); the request's facts
   are read once (`arrival`): ``min_tokens`` is checked against their cap;
5. the request is created complete (`arrival.Arrival.stamped`) and the Guard takes it as it is
   (`Guard.submit_bound`) and decides (the learner proposes); its task calls `UpstreamDispatcher`
   with the request's `Stream` (`Guard.submit`'s ``on_chunk``: the request's
   `Channel`), which relays each chunk as it comes; `answers.PendingAnswer`
   answers while watching for the client's disconnect (which cancels the
   request: the Guard fails it ``cancelled``, frees its slot and closes the
   upstream stream).

Every request that reached the Guard has exactly one terminal event in the
trace (`trace.TraceFile`, which also records the request id and trace context
on ``arrive``) and in ``/metrics`` (`metrics.MetricsSink`). A failing trace
sink never withholds an answer: it is logged, counted and makes ``/readyz``
fail. ``/healthz`` is liveness; ``/readyz`` readiness (`readiness`: the upstream answered
its last probe and is not ejected for failed requests, the trace is being written). Every
error has OpenAI's shape (`wire`), unknown routes included.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from ..clock import Clock, MonotonicClock
from ..contract import Contract
from ..enforce.dispatchers import ChunkSink
from ..enforce.guard import Guard, Outcome
from ..enforce.guard_config import GuardConfig
from ..enforce.headroom import MetricsHeadroomSource
from ..enforce.identity import Identity
from ..errors import DispatchError, EnforcementError, SinkError
from ..facts import RequestFacts
from ..fleet.credits import SharedCredits
from .access import AccessNote, RequestIds, access_note, context_of
from .answers import Answers, PendingAnswer
from .arrival import Arrival, deadline_of, facts_of
from .config import identity_from_headers
from .edge import BadRequest, Endpoint, check_body, check_credentials_once, parse_json, read_body
from .exposition import tenant_aliases, without_tenant_names
from .fleet import FleetDispatcher, RouteAtDispatch, build_dispatcher, upstreams
from .fleet_trace import FleetTrace
from .outlier import OutlierLog, watch_outliers
from .prometheus import MetricsSink
from .readiness import Readiness
from .reasons import ANSWERS, classify
from .reload import ReloadableBinder, on_sighup, reload_binder
from .replica import GatewayPool, register_fleet_series
from .server import FIRST_BYTE, KEEP_ALIVE_S, loop_name, serving
from .settings import GatewaySettings
from .trace import TraceFile, existing_trace, resume_window
from .upstream import END, Channel
from .wire import ForwardedContext, error_body, error_response, relayed

__all__ = ["KEEP_ALIVE_S", "Gateway", "GatewaySettings", "TraceFile", "error_body", "serving"]

log = logging.getLogger("rvguard.gateway")
_CLOSE = {"connection": "close"}


def _context(http: HttpRequest) -> ForwardedContext:
    return context_of(http.scope, http.headers)


class Gateway:
    """One contract, one upstream, one Guard; ``app`` is the ASGI application.

    Args:
        contract: the contract to enforce.
        settings: upstream, keys, learner, trace, timeouts, limits.
        clock: the Guard's clock (default `MonotonicClock`: the start is the contract's epoch).
        registry: Prometheus registry (default a fresh one).

    Raises:
        SpecError: bad settings, or a trace path that already holds a trace.
    """

    def __init__(
        self,
        contract: Contract,
        settings: GatewaySettings,
        *,
        clock: Clock | None = None,
        registry: Any = None,
    ) -> None:
        from prometheus_client import CollectorRegistry

        self.contract = contract
        self.settings = settings
        self.clock: Clock = clock if clock is not None else _clock(settings)
        self.trace = None
        if settings.trace is not None:
            self.trace = TraceFile(
                settings.trace, self.clock, replica=settings.replica, max_bytes=settings.trace_max_bytes
            )
        c_e = {name: settings.engine_slots.get(name, contract.slots) for name, _ in settings.engines}
        hooks = FleetTrace(self.trace, self.clock, staleness=settings.staleness, slots=c_e)
        self.dispatcher, slots = build_dispatcher(contract, settings, self.clock, hooks)
        self.fleet = self.dispatcher if isinstance(self.dispatcher, FleetDispatcher) else None
        pool = settings.credits
        self.credits = None if pool is None else SharedCredits.open(contract, pool, now=self.clock.now())
        self._binder = ReloadableBinder(settings.keys.binder(contract))  # bound once, on the headers
        self.metrics = MetricsSink(contract, registry if registry is not None else CollectorRegistry())
        register_fleet_series(self.metrics.registry, self.fleet, self.credits)
        watch_outliers(
            upstreams(self.dispatcher), self.metrics.registry, OutlierLog(self.trace, self._rerouted)
        )
        sinks: list[Any] = [self.metrics] if self.trace is None else [self.trace, self.metrics]
        if self.fleet is not None:  # routes each dispatch before it is traced
            sinks.insert(0, RouteAtDispatch(self.fleet))
        self.guard = self._guard(slots, sinks)
        if self.trace is not None and not settings.replica:  # a restart: the window's floor goes on
            resume_window(self.guard.core, self.trace, self.clock.now(), contract.window)
        self.metrics.watch_guard(self.guard)
        self._relief(settings)
        if self.trace is not None:
            trace = self.trace
            self.metrics.trace_failing.set_function(lambda: float(trace.failing))
        self.answers = Answers(contract, self.clock, self.guard.core)  # the core's credit ledger
        self._ids = itertools.count()
        restart = "" if self.trace is None else self.trace.rid_prefix  # r<segment>- after a restart
        # replicas' rids never collide, whatever their names: a random tag per process
        tag = f"{settings.replica}-{secrets.token_hex(3)}-" if settings.replica else ""
        self._rid_prefix = f"{tag}{restart}g"
        self._tasks: dict[asyncio.Task[Outcome], str] = {}
        self.readiness = Readiness(self.dispatcher, self.metrics)
        self._open = False
        app = Starlette(
            routes=self._routes(),
            lifespan=self._lifespan,
            exception_handlers={HTTPException: self._http_error, Exception: self._crash},
        )
        self.app: ASGIApp = RequestIds(app)

    @property
    def models(self) -> frozenset[str]:
        """The model ids the upstream listed at its last probe that answered."""
        return self.readiness.models

    @property
    def upstream_up(self) -> bool:
        """The upstream answered its last probe."""
        return self.readiness.upstream_up

    def _rerouted(self) -> None:
        if self.fleet is not None:  # an engine left or came back: waiting dispatches route again
            self.fleet.wake()

    def _relief(self, settings: GatewaySettings) -> None:
        """Rationed relief when the settings ask (the fewest preempted, gradual restores, a hold
        bound); the Guard hands each dispatch relief's S counter (`Guard.submit`'s `Stream`)."""
        loop = self.guard.headroom
        if loop is not None and settings.relief is not None:
            loop.ration_with(settings.relief)
        elif loop is not None and settings.bare_preemption:
            loop.ration_by_default = False

    def _guard(self, slots: int, sinks: list[Any]) -> Guard:
        """The Guard: ΣC_e slots over several engines; the shared credit pool, if any."""
        c, s = self.contract, self.settings
        return Guard(
            c if slots == c.slots else c.model_copy(update={"slots": slots}),
            self.dispatcher,
            learner=s.learner,
            sinks=sinks,
            clock=self.clock,
            binder=None,  # the gateway bound the tenant on the headers (`_bind`): once
            credits=None if self.credits is None else GatewayPool(self.credits, self.trace),
            headroom=self._headroom_source(),
            config=GuardConfig(
                learner_timeout=s.learner_timeout,
                stall_threshold=s.stall_threshold,
                timeout=s.timeout,
                drain_timeout=s.drain_timeout,
                deferred_drop=s.deferred_drop,
                watch=s.watch,
                dispatch_policy=s.dispatch_policy,
                preempt_grace=s.preempt_grace,
                retry_after=s.retry_after,
                redline=s.redline,
                headroom_interval=s.headroom_interval,
                eviction=s.eviction,
                properties=s.properties,
                shadow=s.shadow,
            ),
        )

    def _headroom_source(self) -> MetricsHeadroomSource | None:
        """The engine's /metrics as headroom (``seqs`` too when the redline watches it: C slots)."""
        s = self.settings
        if s.headroom_url is None or s.redline is None:
            return None
        seqs = any(r.name == "seqs" for r in s.redline.resources)
        return MetricsHeadroomSource(
            s.headroom_url,
            self.clock,
            min_interval=s.headroom_interval,
            max_num_seqs=self.contract.slots if seqs else None,
        )

    def _routes(self) -> list[Route]:
        return [
            Route("/v1/completions", self._completions, methods=["POST"]),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/metrics", self._metrics, methods=["GET"]),
            Route("/healthz", self._healthz, methods=["GET"]),
            Route("/readyz", self._readyz, methods=["GET"]),
        ]

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._log_startup()
        prober = asyncio.ensure_future(self.readiness.loop(self.settings.probe_interval))  # ready after one
        loops = [prober]
        if self.credits is not None:  # connect, load the script, check the store before serving;
            await self.credits.warm(self.clock.now)  # then join before each window start
            loops.append(asyncio.ensure_future(self.credits.run(self.clock)))
        if self.fleet is not None:
            self.fleet.start()
        reload = on_sighup(self.reload_keys)
        try:
            async with self.guard:  # on exit: drain live requests, then fail what is left ("shutdown")
                self._open = True
                yield
        finally:
            reload.close()
            self._open = False
            for loop in loops:
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
            await self.dispatcher.aclose()
            if self.credits is not None:
                await self.credits.aclose()

    def _log_startup(self) -> None:
        s, keys = self.settings, self.settings.keys
        c = self.contract
        log.info(
            "rvguard gateway starting",
            extra={
                "event": "startup",
                "upstream": ",".join(f"{name}={url}" for name, url in s.engines),
                "replica": s.replica or "",
                "credits": s.credits.safe_url if s.credits is not None else "",
                "upstream_key": s.upstream_api_key is not None,
                "tenants": ",".join(f"{n}:B={t.floor}:D={t.deadline:g}" for n, t in c.tenants.items()),
                "slots": c.slots,
                "window": c.window,
                "credit": c.credit.value,
                "keys": len(keys.keys),
                "claims": keys.claim_secret is not None,
                "jwt": keys.jwt is not None,
                "unauthenticated": keys.unauthenticated,
                "trace": str(s.trace) if s.trace is not None else "",
                "learner": type(s.learner).__name__ if s.learner is not None else "AdmitAll",
                "max_body": s.max_body,
                "header_timeout": s.header_timeout,
                "body_timeout": s.body_timeout,
                "loop": loop_name(asyncio.get_running_loop()),
            },
        )
        if self.guard.contract.slots != c.slots:
            log.info(
                "%d engines: the Guard holds %d slots (ΣC_e); judge this replica's trace with slots: %d",
                len(s.engines),
                self.guard.contract.slots,
                self.guard.contract.slots,
                extra={"event": "startup", "slots": self.guard.contract.slots},
            )
        if keys.unauthenticated == "lowest-tier":
            log.warning(
                "the keys file serves anonymous traffic: requests without a valid key go to tenant %r",
                c.lowest_tier_tenant,
                extra={"event": "startup", "unauthenticated": "lowest-tier"},
            )
        elif not keys.keys and keys.claim_secret is None and keys.jwt is None:
            log.warning(
                "no API keys, JWKS or claim secret: every request will be refused with 401 (pass --keys)",
                extra={"event": "startup"},
            )

    async def reload_keys(self) -> None:
        """Read the keys file (and its JWKS) again and bind with it from now on; requests in flight
        keep their tenant, none is dropped; a bad file is logged and the keys in use kept."""
        source = self.settings.keys.source
        if source is not None:
            self._binder.current = await reload_binder(source, self.contract, self._binder.current)

    # -- readiness -------------------------------------------------------------
    async def _readyz(self, http: HttpRequest) -> Response:
        return self.readiness.readyz(self._open, self.trace, self.credits)

    async def _healthz(self, http: HttpRequest) -> Response:
        s = self.guard.statistics()
        return JSONResponse(
            {"status": "ok", "live": s.live, "in_flight": s.in_flight, "queue_depth": s.queue_depth}
        )

    # -- completions -----------------------------------------------------------
    async def _completions(self, http: HttpRequest) -> Response:
        return await self._serve(http, "completions")

    async def _chat(self, http: HttpRequest) -> Response:
        return await self._serve(http, "chat")

    def _bind(self, http: HttpRequest, ctx: ForwardedContext) -> tuple[Identity, str] | Response:
        """The request's identity and tenant, or the 400/401 refusing it (on its headers alone)."""
        try:  # before identity: a duplicated credential is refused whoever it names
            check_credentials_once(http)
        except BadRequest as err:
            self.metrics.invalid.labels(err.code or "invalid").inc()
            self._refused(ctx, None, err.status, err.code or "invalid", detail=str(err))
            return error_response(
                400, str(err), "invalid_request_error", param=err.param, code=err.code, headers=_CLOSE
            )
        identity = identity_from_headers(http.headers)
        binding = self._binder.bind(identity)  # claim expiry: the binder's wall clock (Unix time)
        if not binding.authenticated:
            self.metrics.unauthenticated.inc()
        if binding.tenant is not None:
            return identity, binding.tenant
        self._refused(ctx, None, 401, "unauthenticated")  # the body is never read, the connection closed
        message = f"unauthenticated: {binding.reason or 'no valid API key or token'}"
        headers = {"www-authenticate": "Bearer", "connection": "close"}
        return error_response(401, message, "authentication_error", code="invalid_api_key", headers=headers)

    async def _serve(self, http: HttpRequest, endpoint: Endpoint) -> Response:
        ctx, note = _context(http), access_note(http.scope)
        bound = self._bind(http, ctx)
        if isinstance(bound, Response):
            note.refused("unauthenticated" if bound.status_code == 401 else "duplicate_header")
            return bound
        _identity, tenant = bound
        note.tenant = tenant
        try:
            body = await self._read(http, endpoint)
            facts, prompt = await facts_of(
                self.guard.core.facts, self.dispatcher, endpoint, body, tenant, ctx
            )
        except BadRequest as err:
            note.refused(err.code or "invalid")
            self.metrics.invalid.labels(err.code or "invalid").inc()
            self._refused(ctx, tenant, err.status, err.code or "invalid", detail=str(err))
            unread = {"connection": "close"} if err.status in (408, 413) else None  # the rest is not read
            return error_response(
                err.status, str(err), "invalid_request_error", param=err.param, code=err.code, headers=unread
            )
        except DispatchError as err:  # before arrival: the request never reaches the Guard
            note.refused("tokenize_failed")
            self._upstream_failed(ctx, tenant, "", 502, str(err))
            message = f"cannot count the prompt's tokens for token credits: {err}"
            return error_response(502, message, "upstream_error", code="tokenize_failed")
        return self._submit(ctx, facts, endpoint, body, prompt, note, self._stamp(http))

    def _stamp(self, http: HttpRequest) -> float | None:
        """Seconds since the request's first byte was read (None: not known), judged by the watch."""
        first = http.scope.get("extensions", {}).get(FIRST_BYTE)
        if not isinstance(first, float):
            return None
        gap = max(0.0, time.monotonic() - first)
        self.guard.observe_arrival_gap(gap)
        return gap

    async def _read(self, http: HttpRequest, endpoint: Endpoint) -> dict[str, Any]:
        s = self.settings
        body = parse_json(await read_body(http, max_body=s.max_body, timeout=s.body_timeout))
        check_body(body, endpoint)
        model = body.get("model")
        if model is not None and self.models and model not in self.models:
            raise BadRequest(
                f"the model {model!r} does not exist (served: {', '.join(sorted(self.models))})",
                status=404,
                param="model",
                code="model_not_found",
            )
        return body

    def _submit(
        self,
        ctx: ForwardedContext,
        facts: RequestFacts,
        endpoint: Endpoint,
        body: dict[str, Any],
        prompt_tokens: int | None,
        note: AccessNote,
        gap: float | None = None,
    ) -> Response:
        rid = note.rid = f"{self._rid_prefix}{next(self._ids)}"
        payload = {"endpoint": endpoint, "body": body, "headers": ctx.headers}
        tenant = facts.tenant
        arrival = Arrival(
            rid, facts, deadline_of(self.contract, self.clock, tenant, gap), prompt_tokens, payload
        )
        if self.trace is not None:
            notes = {"request_id": ctx.request_id, "traceparent": ctx.traceparent}
            self.trace.annotate(rid, notes if gap is None else {**notes, "arrival_gap": gap})
        channel = Channel()
        on_chunk = channel.chunk if body.get("stream") is True else None  # the dispatch's `Stream`
        task = asyncio.ensure_future(self._decide(arrival, ctx, on_chunk))
        task.add_done_callback(note.settle)  # before the answer resumes: its outcome for the access line
        task.add_done_callback(lambda t: self._finished(t, channel))
        self._tasks[task] = rid
        return PendingAnswer(self.answers, task, channel, body, rid=rid, tenant=tenant)

    async def _decide(self, arrival: Arrival, ctx: ForwardedContext, on_chunk: ChunkSink | None) -> Outcome:
        rid = arrival.rid
        try:  # the request, created complete here: stamped on the Guard's clock in the step it takes it
            outcome = await self.guard.submit_bound(arrival.stamped(self.clock.now()), on_chunk=on_chunk)
        except SinkError as err:  # the trace failed (logged there); the request was decided all the same
            outcome = err.outcome if err.outcome is not None else Outcome(rid, "failed", str(err), error=err)
        except EnforcementError as err:  # the guard is closed (503), or refused the request
            outcome = Outcome(rid, "failed", str(err), error=err)
        self._account(outcome, ctx, arrival.facts.tenant)
        return outcome

    def _finished(self, task: asyncio.Task[Outcome], channel: Channel) -> None:
        channel.put(END)
        rid = self._tasks.pop(task, "")
        if self.trace is not None:
            self.trace.forget(rid)
        if task.cancelled():
            log.info("client went away", extra={"event": "cancelled", "rid": rid})

    # -- accounting and logs ---------------------------------------------------
    def _account(self, outcome: Outcome, ctx: ForwardedContext, tenant: str) -> None:
        """Metrics of the answer, and one log line for an outcome that is not a completion."""
        if outcome.status == "completed":
            if outcome.response is not None:
                self.metrics.observe_answer(tenant, outcome.response)
            return
        status, _body, _headers = self.answers.failure(outcome)
        log_as = ANSWERS[classify(outcome)].log
        if log_as == "refused":
            self._refused(ctx, tenant, status, outcome.reason, rid=outcome.rid)
        elif log_as == "preempted":
            log.info("request preempted", extra=_fields(ctx, tenant, event="preempted", rid=outcome.rid))
        elif log_as == "client_error":
            log.info(
                "the upstream refused the request as the client's mistake",
                extra=_fields(
                    ctx, tenant, event="client_error", rid=outcome.rid, status=status, reason=outcome.reason
                ),
            )
        else:
            self._upstream_failed(ctx, tenant, outcome.rid, status, outcome.reason)

    def _refused(
        self,
        ctx: ForwardedContext,
        tenant: str | None,
        status: int,
        reason: str,
        *,
        rid: str = "",
        detail: str = "",
    ) -> None:
        extra = _fields(ctx, tenant, event="refused", rid=rid, status=status, reason=reason)
        if detail:
            extra["detail"] = detail
        log.info("request refused", extra=extra)

    def _upstream_failed(
        self, ctx: ForwardedContext, tenant: str, rid: str, status: int, reason: str
    ) -> None:
        log.warning(
            "upstream failed",
            extra=_fields(ctx, tenant, event="upstream_failed", rid=rid, status=status, reason=reason),
        )

    # -- other routes ----------------------------------------------------------
    async def _models(self, http: HttpRequest) -> Response:
        bound = self._bind(http, _context(http))  # authenticated like the API
        if isinstance(bound, Response):
            access_note(http.scope).refused("unauthenticated")
            return bound
        try:
            status, data = await self.dispatcher.get_json("/v1/models")
        except DispatchError as err:
            return error_response(err.status_hint, str(err), "upstream_error", code="upstream_unreachable")
        if status != 200 and isinstance(data, Mapping) and isinstance(data.get("error"), Mapping):
            return JSONResponse(relayed(data["error"]), status_code=status)
        return JSONResponse(data, status_code=status)

    async def _metrics(self, http: HttpRequest) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if self.settings.metrics_auth:
            bound = self._bind(http, _context(http))
            if isinstance(bound, Response):
                return bound

        text = generate_latest(self.metrics.registry)
        if not self.settings.metrics_tenant_names:
            text = without_tenant_names(text, tenant_aliases(self.contract))
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    async def _http_error(self, http: HttpRequest, exc: Exception) -> Response:
        """Starlette's own errors (an unknown route: 404, a wrong method: 405) in OpenAI's shape."""
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        message = f"no route {http.method} {http.url.path}" if status == 404 else str(exc.detail)
        code = {404: "unknown_url", 405: "method_not_allowed"}.get(status)
        self.metrics.invalid.labels(code or str(status)).inc()
        return error_response(status, message, "invalid_request_error", code=code, headers=exc.headers)

    async def _crash(self, http: HttpRequest, exc: Exception) -> Response:
        """A bug: logged with its traceback, answered 500 in OpenAI's shape."""
        log.error(
            "internal error", exc_info=exc, extra={"event": "internal_error", **_fields(_context(http), None)}
        )
        return error_response(500, "internal error in the gateway", "server_error", code="internal_error")


def _clock(settings: GatewaySettings) -> Clock:
    """Unix time for a replica; else from the existing trace's origin (a restart), else from 0."""
    if settings.replica:
        return MonotonicClock.unix_anchored()
    prior = existing_trace(settings.trace) if settings.trace is not None else None
    return MonotonicClock() if prior is None else MonotonicClock.since(prior[0].origin)


def _fields(ctx: ForwardedContext, tenant: str | None, **more: Any) -> dict[str, Any]:
    """The fields of a request's log line: its ids, its tenant, and ``more``."""
    out: dict[str, Any] = {
        "request_id": ctx.request_id,
        "tenant": tenant or "",
        "traceparent": ctx.traceparent,
    }
    out.update(more)
    return out
