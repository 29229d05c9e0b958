"""Several engines behind one gateway: a `Dispatcher` that routes, survives a dead engine, relocates.

Theory of operation
-------------------
The Guard holds ΣC_e slots and dispatches as before; `FleetDispatcher.dispatch`
then picks the engine, with `rvguard.fleet.router.Router` on the engines'
views read *at this decision* (`Engine.view`): P2C on headroom while every
engine in rotation has a fresh view, siloed (a fixed ring from the rid's
hash) when one is stale or missing. The mode is logged when it changes and
shown in ``/metrics``. Each decision is reported (``on_route``: rid, engine,
view time, mode); per-engine in flight never exceeds C_e (the router only
picks an engine with a free slot; when every engine in rotation is full, the
dispatch waits for a slot, which happens only while an engine is out).

A call that fails in transport (refused, reset, cut mid-stream) takes its
engine out of rotation (`Engine.down`; a readiness probe brings it back).
The request then either fails once (the Guard records one ``fail``; the
client gets 502) or, when it may resume elsewhere
(`rvguard.fleet.relocate.relocatable`: a ``/v1/completions`` request with one
sequence), continues on another engine from its prompt's and output's token
ids with the remaining budget (``on_relocate``, then ``on_route``): the
client sees one stream (`_Relay`). At most ``relocations`` requests are
being relocated at once (the runbook's k); one that finds no relocation slot
fails once. A request moves at most once per other engine.

Cost per dispatch: O(N) for N engines (the views), plus, after a move, one
``/detokenize`` call per streamed chunk (the text is rendered from token ids).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ..clock import Clock
from ..enforce.dispatchers import Response, Stream
from ..enforce.request import Request
from ..errors import DispatchError
from ..events import Complete, Dispatch, Drop, Event, Fail, Reject
from ..fleet.relocate import NotRelocatable, Progress, RelocationSlots, continuation, relocatable
from ..fleet.router import Route, Router
from .engines import Engine
from .lean import TransportFailure
from .outlier import Outlier, probe
from .upstream import PATHS, Endpoint, UpstreamDispatcher

if TYPE_CHECKING:
    from ..contract import Contract
    from .settings import GatewaySettings

__all__ = [
    "FleetDispatcher",
    "FleetHooks",
    "FleetStatistics",
    "RouteAtDispatch",
    "build_dispatcher",
    "upstreams",
]

log = logging.getLogger("rvguard.gateway")
#: seconds an engine's probe may take: under the gateway's own probe time-out (2 s), so a hung
#: engine is found out rather than the whole probe cancelled
PROBE_S = 1.5

Render = Callable[[list[int]], Awaitable[str]]


class FleetHooks(Protocol):
    """Told each routing decision and each move, in order (the gateway writes them to its trace)."""

    def routed(self, rid: str, engine: str, route: Route, t: float) -> None:
        """``rid`` goes to ``engine``, decided at ``t``: at its dispatch, before the dispatch is
        traced, or after it when the dispatch waited for a slot (a late route)."""
        ...

    def evicted(self, rid: str, engine: str, state: int, reason: str) -> None:
        """``rid`` lost ``engine`` mid-way with ``state`` tokens (prompt + output) accumulated."""
        ...

    def relocated(self, rid: str, engine: str, route: Route) -> None:
        """``rid`` resumes on ``engine`` (relocate, route, dispatch)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class FleetStatistics:
    """Routing and relocation counters (trio-style ``statistics()``)."""

    p2c: int
    siloed: int
    unroutable: int
    siloed_reasons: dict[str, int]
    relocated: int
    relocation_refused: int
    relocating: int


class _Relay:
    """What an engine's dispatch of a relocatable request is told (`Stream`, its `stream`): each
    chunk fed to its `Progress` and passed on to the caller's stream as one stream, in order (after
    a move, rendered from ids), with the tokens generated so far across every engine."""

    __slots__ = ("_pump", "_queue", "client", "engine", "keep_ids", "progress", "render", "stream", "tokens")

    def __init__(self, progress: Progress, outer: Stream | None, *, keep_ids: bool) -> None:
        self.progress = progress
        self.client = None if outer is None else outer.chunk  # the caller's reader of the chunks
        self.tokens = None if outer is None else outer.tokens
        self.keep_ids = keep_ids
        self.engine = ""  # the engine it runs on now
        self.render: Render | None = None
        self.stream = Stream(self.chunk)  # what each engine's dispatch tells
        self._queue: list[tuple[dict[str, Any], bool]] = []
        self._pump: asyncio.Task[None] | None = None

    def chunk(self, data: str, usage_only: bool) -> None:
        """One chunk from the engine's dispatch."""
        chunk = json.loads(data)
        if not self.progress.relocated:
            self._feed(chunk)
            self._send(self.progress.outgoing(chunk, keep_ids=self.keep_ids), usage_only)
        elif self.client is None:
            self._feed(chunk)  # no stream to render: the final answer is rendered once
        else:
            self._queue.append((chunk, usage_only))
            if self._pump is None or self._pump.done():
                self._pump = asyncio.ensure_future(self._drain_queue())

    def _feed(self, chunk: dict[str, Any]) -> None:
        self.progress.feed(chunk)
        if self.tokens is not None and chunk.get("choices"):
            self.tokens(len(self.progress.output_ids))

    def _send(self, chunk: dict[str, Any], usage_only: bool) -> None:
        if self.client is not None:
            self.client(json.dumps(chunk, ensure_ascii=False), usage_only)

    async def _drain_queue(self) -> None:
        while self._queue:
            chunk, usage_only = self._queue.pop(0)
            self._feed(chunk)
            assert self.render is not None
            text = await self.render(list(self.progress.output_ids))
            self._send(self.progress.outgoing(chunk, keep_ids=self.keep_ids, rendered=text), usage_only)

    async def drain(self) -> None:
        """Wait until every chunk received so far has been fed (and sent)."""
        while self._pump is not None and not self._pump.done():
            await asyncio.shield(self._pump)
        if self._pump is not None:
            self._pump.result()  # a failed render fails the request

    def close(self) -> None:
        """Stop sending (the request ended)."""
        if self._pump is not None:
            self._pump.cancel()

    async def final(self, resp: Response) -> Response:
        """The last engine's answer, made the whole request's (ids stripped unless asked for)."""
        p = self.progress
        raw = dict(resp.raw)
        choices = [dict(c) for c in raw.get("choices") or ()]
        for c in choices:
            if not self.keep_ids:
                c.pop("token_ids", None)
            c.pop("prompt_token_ids", None)
        if not p.relocated:
            raw["choices"] = choices
            return dataclasses.replace(resp, raw=MappingProxyType(raw))
        assert self.render is not None
        text = (await self.render(list(p.output_ids))).rstrip("\ufffd")
        if choices:
            choices[0]["text"] = text
            if self.keep_ids:
                choices[0]["token_ids"] = list(p.output_ids)
        raw.update(p.identity, choices=choices)
        prompt = len(p.prompt_ids) if p.prompt_ids is not None else resp.prompt_tokens
        out = len(p.output_ids)
        raw["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": out,
            "total_tokens": (prompt or 0) + out,
        }
        return dataclasses.replace(
            resp, text=text, output_tokens=out, prompt_tokens=prompt, raw=MappingProxyType(raw)
        )


def _transport(err: DispatchError) -> bool:
    """True when the call failed in transport (refused, reset, cut): the engine may be dead."""
    import httpx

    cause = err.__cause__
    if isinstance(cause, TransportFailure):  # the lean reader's (`lean`)
        return True
    return isinstance(cause, httpx.TransportError) and not isinstance(cause, httpx.TimeoutException)


class FleetDispatcher:
    """Routes each dispatch over ``engines`` (see module doc); the gateway's dispatcher for N > 1.

    Args:
        engines: the engines, each with its client and C_e.
        router: the routing rule (its generator seeded in tests).
        clock: the gateway's clock (the views are read on it).
        relocations: k, the most requests relocated at once (0: none is).
        hooks: told each routing decision and each move (the trace).
    """

    def __init__(
        self,
        engines: Sequence[Engine],
        router: Router,
        *,
        clock: Clock,
        relocations: int = 2,
        hooks: FleetHooks | None = None,
    ) -> None:
        names = [e.name for e in engines]
        if not engines or len(set(names)) != len(names):
            raise ValueError(f"engines must be named uniquely, got {names}")
        self.engines = list(engines)
        self._by_name = {e.name: e for e in engines}
        self.router = router
        self.clock = clock
        self.relocation = RelocationSlots(relocations)
        self.hooks = hooks
        self._reserved: dict[str, Engine] = {}  # routed at the dispatch event, not yet dispatched
        self.late_routes = 0  # dispatches that waited for a slot: routed after their dispatch event
        self._relays: dict[str, _Relay] = {}  # relocatable requests in flight (`relayed`)
        self.siloed = False
        self.siloed_reason = ""
        self.relocated = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._loops: list[asyncio.Task[None]] = []

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start scraping every engine's ``/metrics`` (one task per engine)."""
        if not self._loops:
            self._loops = [asyncio.ensure_future(self._scrape_loop(e)) for e in self.engines]

    async def _scrape_loop(self, engine: Engine) -> None:
        while True:
            await engine.scrape()
            if engine.telemetry == "slots":
                return  # no telemetry to read: its own slot count is its view
            await asyncio.sleep(engine.interval)

    async def aclose(self) -> None:
        """Stop the scrapes, close every engine's client."""
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loops = []
        for e in self.engines:
            await e.dispatcher.aclose()

    # -- dispatch ----------------------------------------------------------------------
    async def dispatch(self, request: Request, *, stream: Stream | None = None) -> Response:
        """Route ``request``, serve it, telling ``stream`` its chunks as one stream
        (`StreamingDispatcher`); relocate it once its engine dies, if it may move."""
        body: Mapping[str, Any] = request.payload.get("body") or {}
        endpoint = str(request.payload.get("endpoint", "completions"))
        why = relocatable(PATHS.get(endpoint, endpoint), body) if self.relocation.k > 0 else "off"
        if why:
            return await self._plain(request, stream)
        return await self._movable(request, body, stream)

    def relayed(self) -> list[tuple[str, str, int]]:
        """``(rid, engine, output tokens received)`` of each relocatable request in flight."""
        return [(rid, r.engine, len(r.progress.output_ids)) for rid, r in self._relays.items() if r.engine]

    async def _plain(self, request: Request, stream: Stream | None) -> Response:
        engine = await self._take(request.rid)
        try:
            return await engine.dispatcher.dispatch(request, stream=stream)
        except DispatchError as err:
            if _transport(err):
                engine.down(str(err))
            raise
        finally:
            self._release(engine)

    async def _movable(self, request: Request, body: Mapping[str, Any], stream: Stream | None) -> Response:
        rid = request.rid
        relay = self._relays[rid] = _Relay(Progress(), stream, keep_ids=bool(body.get("return_token_ids")))
        current = _with_body(request, {**body, "return_token_ids": True})
        moves, holding, came_from = 0, False, ""
        try:
            while True:
                engine = await self._take(rid, came_from=came_from)
                relay.render = self._renderer(engine, body.get("model"))
                relay.engine = engine.name
                try:
                    resp = await engine.dispatcher.dispatch(current, stream=relay.stream)
                    await relay.drain()
                    return await relay.final(resp)
                except DispatchError as err:
                    if not _transport(err):
                        raise
                    engine.down(str(err))
                    await relay.drain()
                    holding = self._may_move(relay.progress, moves, holding, err)
                    if self.hooks is not None:
                        p = relay.progress
                        state = len(p.prompt_ids or ()) + len(p.output_ids)
                        self.hooks.evicted(rid, engine.name, state, f"engine-down: {engine.name}")
                    current = self._continued(request, body, relay.progress, err)
                    moves += 1
                    came_from = engine.name
                finally:
                    self._release(engine)
        finally:
            relay.close()
            self._relays.pop(rid, None)
            if holding:
                self.relocation.release()

    def _may_move(self, progress: Progress, moves: int, holding: bool, err: DispatchError) -> bool:
        """Hold a relocation slot (taken at the first move), or re-raise ``err`` (it fails once)."""
        if progress.prompt_ids is None and progress.text:
            raise err  # output sent but no ids to resume from: it cannot continue exactly
        if moves >= len(self.engines) - 1 or not (holding or self.relocation.acquire()):
            raise err
        return True

    def _continued(
        self, request: Request, body: Mapping[str, Any], progress: Progress, err: DispatchError
    ) -> Request:
        """The continuation of ``request`` from ``progress`` (or ``err`` re-raised)."""
        try:
            out = continuation({**body, "max_tokens": request.max_tokens}, progress)
        except NotRelocatable:
            raise err from None
        progress.moved()
        self.relocated += 1
        left = out.get("max_tokens")
        return dataclasses.replace(
            _with_body(request, out), max_tokens=left if isinstance(left, int) else request.max_tokens
        )

    def _renderer(self, engine: Engine, model: object) -> Render:
        async def render(ids: list[int]) -> str:
            status, data = await engine.dispatcher.get_json("/detokenize", {"model": model, "tokens": ids})
            text = data.get("prompt") if isinstance(data, Mapping) else None
            if status != 200 or not isinstance(text, str):
                raise DispatchError(f"engine {engine.name} /detokenize answered {status}", status_hint=502)
            return text

        return render

    # -- routing -----------------------------------------------------------------------
    def at_dispatch(self, rid: str, t: float) -> None:
        """Route ``rid`` at its dispatch event (before it is traced) and hold the slot for it.

        When every engine in rotation is full (only while one is out), nothing is held: the
        dispatch routes when a slot frees, after its dispatch event (a *late* route, traced then).
        """
        engine, route = self._route_now(rid)
        if engine is None:
            return
        self._reserved[rid] = engine
        if self.hooks is not None:
            self.hooks.routed(rid, engine.name, route, t)

    def settle(self, rid: str) -> None:
        """``rid`` ended: give back a slot held for it that its dispatch never took (cancelled)."""
        engine = self._reserved.pop(rid, None)
        if engine is not None:
            engine.in_flight -= 1
            self.wake()

    def _route_now(self, rid: str) -> tuple[Engine | None, Route]:
        now = self.clock.now()
        route = self.router.route(rid, [e.view(now) for e in self.engines], now)
        self._mode(route)
        if route.engine is None:
            return None, route
        engine = self._by_name[route.engine]
        engine.in_flight += 1
        engine.routed += 1
        return engine, route

    async def _take(self, rid: str, *, came_from: str = "") -> Engine:
        """The engine held for ``rid`` at its dispatch event, else route now (waiting while every
        engine in rotation is full) and take a slot there."""
        held = None if came_from else self._reserved.pop(rid, None)
        if held is not None:
            return held
        while True:
            engine, route = self._route_now(rid)
            if engine is not None:
                if came_from and self.hooks is not None:
                    self.hooks.relocated(rid, engine.name, route)
                elif not came_from:
                    self.late_routes += 1
                    if self.hooks is not None:
                        self.hooks.routed(rid, engine.name, route, self.clock.now())
                    log.info(
                        "routed after waiting for a slot (a late route)",
                        extra={"event": "route_late", "rid": rid, "engine": engine.name},
                    )
                return engine
            if not any(e.in_rotation for e in self.engines):
                raise DispatchError("no engine in rotation: every engine is down or ejected", status_hint=502)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    def _release(self, engine: Engine) -> None:
        engine.in_flight -= 1
        self.wake()

    def wake(self) -> None:
        """A slot freed or an engine changed state: let waiting dispatches route again."""
        for w in self._waiters:
            if not w.done():
                w.set_result(None)
        self._waiters.clear()

    def _mode(self, route: Route) -> None:
        siloed = route.mode == "siloed"
        if siloed == self.siloed and (not siloed or route.reason == self.siloed_reason):
            return
        self.siloed, self.siloed_reason = siloed, route.reason if siloed else ""
        if siloed:
            log.warning(
                "routing siloed (%s): each request to its fixed engine, no headroom view",
                route.reason,
                extra={"event": "route_siloed", "reason": route.reason},
            )
        else:
            log.info("routing on P2C again (every view fresh)", extra={"event": "route_p2c"})

    def statistics(self) -> FleetStatistics:
        """Routing and relocation counters now."""
        s = self.router.statistics()
        r = self.relocation
        return FleetStatistics(
            s.p2c, s.siloed, s.unroutable, s.siloed_reasons, self.relocated, r.refused, r.busy
        )

    # -- the rest of the upstream interface -----------------------------------------------
    async def models(self) -> list[str]:
        """Probe every engine (its health path, ``GET /v1/models``): in or out of rotation; the
        models they serve. An ejected engine stays out (`rvguard.gateway.outlier.probe`).

        Raises:
            DispatchError: no engine answered.
        """
        answers = await asyncio.gather(*(self._probe(e) for e in self.engines))
        served = [m for got in answers if got is not None for m in got]
        if all(got is None for got in answers):
            raise DispatchError("no engine answered its probe", status_hint=502)
        return sorted(set(served))

    async def _probe(self, engine: Engine) -> list[str] | None:
        try:
            async with asyncio.timeout(PROBE_S):
                got = await probe(engine.dispatcher)
        except TimeoutError:
            engine.probe_missed(f"probe: no answer in {PROBE_S:g} s")
            self.wake()
            return None
        except DispatchError as err:
            if err.status_hint == 504:  # slow, not refused: a busy engine (`Engine.probe_missed`)
                engine.probe_missed(f"probe: {err}")
            else:
                engine.down(f"probe failed: {err}")
            self.wake()
            return None
        engine.up()
        self.wake()
        return got

    def _serving(self) -> list[Engine]:
        alive = [e for e in self.engines if e.in_rotation]
        return alive or self.engines

    async def count_prompt_tokens(
        self, endpoint: Endpoint, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> int:
        """The prompt's tokens, from the first engine in rotation that can say."""
        err: DispatchError | None = None
        for e in self._serving():
            try:
                return await e.dispatcher.count_prompt_tokens(endpoint, body, headers=headers)
            except DispatchError as exc:
                err = exc
        assert err is not None
        raise err

    async def get_json(
        self, path: str, post: Mapping[str, Any] | None = None, *, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        """``get_json`` of the first engine in rotation that answers."""
        err: DispatchError | None = None
        for e in self._serving():
            try:
                return await e.dispatcher.get_json(path, post, headers=headers)
            except DispatchError as exc:
                err = exc
        assert err is not None
        raise err


def _with_body(request: Request, body: Mapping[str, Any]) -> Request:
    return dataclasses.replace(request, payload={**request.payload, "body": dict(body)})


def upstreams(dispatcher: UpstreamDispatcher | FleetDispatcher) -> list[UpstreamDispatcher]:
    """The upstream clients behind ``dispatcher``: itself, or each engine's."""
    if isinstance(dispatcher, FleetDispatcher):
        return [e.dispatcher for e in dispatcher.engines]
    return [dispatcher]


def build_dispatcher(
    contract: Contract,
    settings: GatewaySettings,
    clock: Clock,
    hooks: FleetHooks | None = None,
) -> tuple[UpstreamDispatcher | FleetDispatcher, int]:
    """The gateway's dispatcher for ``settings``' engines, and the slots the Guard holds (ΣC_e).

    One engine: its `UpstreamDispatcher` (no routing). Several: a `FleetDispatcher`.
    """
    clients = []
    for name, url in settings.engines:
        client = UpstreamDispatcher(
            url,
            contract=contract,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            clock=clock,
            send_priority=settings.send_priority,
            api_key=settings.upstream_api_key,
        )
        client.outlier = Outlier(name, settings.outlier, clock)
        clients.append((name, client, settings.engine_slots.get(name, contract.slots)))
    if len(clients) == 1:
        return clients[0][1], clients[0][2]
    engines = [
        Engine(name, client, slots=slots, clock=clock, interval=settings.telemetry_interval)
        for name, client, slots in clients
    ]
    router = Router(random.Random(settings.route_seed), staleness=settings.staleness)
    fleet = FleetDispatcher(engines, router, clock=clock, relocations=settings.relocations, hooks=hooks)
    return fleet, sum(e.slots for e in engines)


class RouteAtDispatch:
    """A Guard sink, first in line: routes each request at its dispatch event (so the ``route``
    record precedes the ``dispatch`` one) and frees what a request that ended unrouted held."""

    def __init__(self, fleet: FleetDispatcher) -> None:
        self.fleet = fleet

    def __call__(self, event: Event) -> None:
        """Take one Guard event."""
        if isinstance(event, Dispatch):
            self.fleet.at_dispatch(event.rid, event.t)
        elif isinstance(event, Complete | Fail | Drop | Reject):
            self.fleet.settle(event.rid)
