"""The Guard's headroom loop: read telemetry, feed the redline in the core, preempt past the hard floor.

Theory of operation
-------------------
The decision core holds the redline (`rvguard.enforce.redline`) and decides what a sample does:
it writes each *fresh* sample as a ``sample`` event, and while the redline fires it holds the
surplus queue back (``demote``) and releases it when the redline clears (``restore``). This loop
is the runtime around that: every ``interval`` seconds it reads the `HeadroomSource` (never more
often: a loop faster than its exporter would only feed duplicates), hands each sample to
`DecisionCore.observe` through the Guard (so the events reach every sink and wake whoever they
concern), and, while the core reports its hard floor crossed, acts on the running surplus: with
an eviction configuration (`evict_with`), the emergency channel (`rvguard.enforce.emergency`)
evicts the few the planner picks (S descending, credited headroom, at most k in flight, behind
the link bucket); without one, it asks the Guard to preempt every running surplus request (bare
preemption: grace, then stop, the caller gets its retry signal). With the contract's
``eviction.voluntary`` block (or `voluntary_with`), every poll also asks the voluntary channel
(`rvguard.enforce.voluntary`: the crossover rule, through the same planner, k and link
bucket). Either way `Guard.preempt`'s test refuses floor work, so PR holds by construction.

Rationed (`ration_with`, or ``relief=``: a `ReliefConfig`, `rvguard.enforce.rationing`), the loop
preempts past the hard floor only the fewest running surplus requests whose states (prompt plus the
tokens reported through `progress`) cover the floor's shortfall, counting the stops no fresh sample
has measured yet; the core restores held surplus as the headroom allows; and a request held
``hold_bound`` seconds is answered (``fail(hold-bound)``, `DecisionCore.expire_held`: `bounded`
counts them) before each read, every ``interval`` while a read is pending and after it, failed or
not, so no held request waits past the bound plus one interval (and the event loop's own lag): a
slow or failing scrape does not stretch it (it did: on vLLM's ``/metrics`` answering in ~0.07 s, a
2 s bound polled every 0.05 s was answered after up to 2.12 s).

Rationing is the default once the cache's size is known: a source that states the KV cache's size in
tokens (`MetricsHeadroomSource.kv_capacity`, from vLLM's ``vllm:cache_config_info``) rations with it
(``ReliefConfig(capacity)``, the default hold bound) from the first poll that knows it, unless the
loop was told otherwise (``relief=``, `ration_with`) or ``ration_by_default`` is off. Without that
size (a plain callable source, an engine that does not state it) the fraction cannot be turned into
tokens and past the hard floor bare preemption stops every running surplus request, as before.

One sample cannot hold surplus for ever: while the redline fires on a deciding sample older than
``hold_limit`` (default: the contract's ``headroom.staleness``, else 30 s), every poll ends the
held and queued surplus ``fail`` with reason ``redline-stale`` (`DecisionCore.expire_hold`; the
gateway answers 503 with a retry signal), and the first such poll of an episode logs a warning
(`expired` counts the requests). A series the source refused (a stamp out of its skew bound,
one going backwards, a missing or out-of-range series beside valid ones) is counted as an error
too, and the other resources' readings are used.

A telemetry error (unreachable, malformed) is counted and kept (`errors`, `last_error`) and the
loop goes on: the redline keeps its last state, the samples' age shows in ``/metrics``
(``rvguard_headroom_sample_age_seconds``) and the stale-telemetry alert fires. Any other
exception from a poll (a plain callable source is the embedder's code; a sample the core
refuses) is counted the same way and logged with its traceback, and the loop goes on too: a
loop that ended quietly would leave the redline on its last reading for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import EnforcementError, SpecError, TelemetryError
from .emergency import EmergencyChannel
from .eviction import Candidate, EvictionConfig, VoluntaryConfig, eviction_config, voluntary_config
from .headroom import HeadroomSource
from .rationing import InFlight, ReliefConfig, preempt_fewest
from .redline import HardFloorCrossing, HeadroomSample
from .voluntary import VoluntaryChannel

if TYPE_CHECKING:
    from .core import DecisionCore
    from .host import ReliefHost
    from .preemption import Preemption

__all__ = ["HeadroomLoop"]

log = logging.getLogger("rvguard.enforce")


class HeadroomLoop:
    """Polls ``source`` for ``host`` every ``interval`` seconds (see module doc).

    Args:
        host: the runtime that acts (`ReliefHost`: stop, evict, feed a sample, deliver events).
        source: the telemetry read every ``interval`` seconds.
        core: the decision core whose redline and relief decide (its contract's blocks apply).
        preemption: the notices the runtime's ``preempt`` gives (who may be, who already is).

    Attributes:
        polls: reads attempted.
        samples: samples handed to the core (fresh or not: the core decides).
        errors: polls that raised (a `TelemetryError`, or anything else in the loop's task).
        last_error: the last of them.
        preempted: preemptions asked for past the hard floor (without an eviction channel).
        emergency: the emergency eviction channel (`evict_with`), or ``None``.
        voluntary: the voluntary eviction channel (`voluntary_with`), or ``None``.
        relief: rationed relief's configuration (`ration_with`, or the source's cache size), or
            ``None``: preempt all.
        ration_by_default: ration once the source states the KV cache's size (module doc).
        bounded: held requests answered at the hold bound (rationed).
    """

    def __init__(
        self,
        host: ReliefHost,
        source: HeadroomSource,
        *,
        core: DecisionCore,
        preemption: Preemption,
        interval: float,
        eviction: EvictionConfig | None = None,
        hold_limit: float | None = None,
        relief: ReliefConfig | None = None,
    ) -> None:
        if not 0.0 < interval < float("inf"):
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        if core.redline is None:
            raise EnforcementError("a headroom source needs a redline (RedlineConfig) to act on it")
        self._host, self._core, self._preemption = host, core, preemption
        self._contract = contract = core.contract
        self._source = source
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self.polls = 0
        self.samples = 0
        self.errors = 0
        self.last_error: Exception | None = None
        self.preempted = 0
        block = contract.headroom
        self.hold_limit = hold_limit if hold_limit is not None else 30.0 if block is None else block.staleness
        self.expired = 0
        self._expiring = False
        self.emergency: EmergencyChannel | None = None
        self.voluntary: VoluntaryChannel | None = None
        self.relief: ReliefConfig | None = None
        self.ration_by_default = True
        self.bounded = 0
        self._generated: dict[str, int] = {}
        self._relieving = InFlight()  # preemptions no fresh sample has measured yet
        if relief is not None:
            self.ration_with(relief)
        config = eviction if eviction is not None else eviction_config(contract.eviction)
        if config is not None:
            self.evict_with(config)
            crossing = voluntary_config(contract.eviction)
            if crossing is not None:
                self.voluntary_with(crossing)

    def evict_with(self, config: EvictionConfig) -> EmergencyChannel:
        """Past the hard floor, evict through the planner with ``config`` instead of preempting all.

        Raises:
            SpecError: ``config.k`` exceeds the contract's ``eviction.k``, or ``config.target`` or
                ``config.capacity`` its ``eviction.target`` or ``eviction.capacity`` when stated (the
                bounds EV judges against: a larger target or capacity credits less and evicts more).
        """
        block = self._contract.eviction
        if block is not None:
            for name, mine, stated in (
                ("k", config.k, block.k),
                ("target", config.target, block.target),
                ("capacity", config.capacity, block.capacity),
            ):
                if stated is not None and mine > stated:
                    raise SpecError(
                        f"the eviction channel's {name} = {mine} exceeds the contract's "
                        f"eviction.{name} = {stated}",
                        field=f"eviction.{name}",
                        value=mine,
                    )
        self.emergency = EmergencyChannel(
            self._host, config, core=self._core, preemption=self._preemption, now=self._host.clock.now()
        )
        return self.emergency

    def voluntary_with(self, config: VoluntaryConfig) -> VoluntaryChannel:
        """On every poll, also evict what the crossover rule picks (`rvguard.enforce.voluntary`),
        through the emergency channel's planner (its k, link bucket and credit).

        Raises:
            EnforcementError: there is no emergency channel (`evict_with`) to share the planner of.
        """
        if self.emergency is None:
            raise EnforcementError("the voluntary channel shares the emergency channel's planner: none set")
        self.voluntary = VoluntaryChannel(self._host, self.emergency, config, core=self._core)
        return self.voluntary

    def ration_with(self, config: ReliefConfig) -> None:
        """Ration relief (`rvguard.enforce.rationing`): past the hard floor preempt only the fewest
        the floor needs, restore held surplus as the headroom allows, answer a request held longer
        than ``config.hold_bound``. An emergency channel, when set, still decides evictions."""
        self.relief = config
        self._core.ration(config)

    def counter(self, rid: str) -> Callable[[int], None] | None:
        """``rid``'s tokens-generated callback (a streaming dispatch's `Stream.tokens`) while relief
        ranks by S (an emergency channel, or rationed relief); ``None`` when nothing reads S."""
        if self.emergency is None and self.relief is None:
            return None
        return functools.partial(self.progress, rid)

    def progress(self, rid: str, generated: int) -> None:
        """``rid`` has generated ``generated`` tokens so far (its S for the rationed preemption and
        the emergency channel's ranking)."""
        if self.emergency is not None:
            self.emergency.progress(rid, generated)
        if self.relief is not None and self._core.is_live(rid):
            self._generated[rid] = generated

    def start(self) -> None:
        """Run the loop as a task of the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="rvguard-headroom")

    async def stop(self) -> None:
        """Cancel the loop and wait for it to end."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception as exc:  # counted, logged, and the loop goes on (module doc)
                self.errors += 1
                self.last_error = exc
                log.exception(
                    "headroom poll failed: %s: %s", type(exc).__name__, exc, extra={"event": "headroom_error"}
                )
            await asyncio.sleep(self.interval)

    async def poll(self) -> int:
        """Read once, feed the core, preempt past the hard floor; the number of samples read.
        Rationed, the held are answered at their bound before the read, every ``interval`` while it
        is pending and after it, failed or not: neither a slow nor a failing scrape delays them."""
        self.polls += 1
        try:
            samples = await (self._source.read() if self.relief is None else self._read_bounded())
            for sample in samples:
                self._host.observe_headroom(sample)
                self.samples += 1
        except TelemetryError as exc:
            self.errors += 1
            self.last_error = exc
            self._expire_hold()
            self._expire_held()
            return 0
        for refused in getattr(self._source, "take_errors", list)():  # series refused beside valid ones
            self.errors += 1
            self.last_error = refused
        self._ration_from_source()
        self._expire_hold()
        self._expire_held()
        crossing = self._core.hard_floor_crossed()
        if self.emergency is not None:
            self.emergency.land()
            now = self._host.clock.now()
            if crossing is not None:
                self.emergency.act(crossing, now)
            if self.voluntary is not None:
                self.voluntary.act(now)
        elif crossing is not None and self.relief is not None:
            self._preempt_fewest(crossing, self.relief)
        elif crossing is not None:
            self._preempt_surplus(crossing.resource)
        return len(samples)

    def _ration_from_source(self) -> None:
        """Ration with the KV cache's size once the source states it (module doc)."""
        capacity = getattr(self._source, "kv_capacity", None)
        if self.relief is None and self.ration_by_default and isinstance(capacity, int) and capacity > 0:
            self.ration_with(ReliefConfig(capacity))

    def _expire_hold(self) -> None:
        """End the surplus a sample older than ``hold_limit`` still holds (module doc)."""
        ended = self._core.expire_hold(self._host.clock.now(), self.hold_limit)
        redline = self._core.redline
        if redline is None or not redline.firing:
            self._expiring = False
        if ended and not self._expiring:
            self._expiring = True
            log.warning(
                "the redline has held surplus on a sample older than %g s: its requests get 503 and "
                "a retry signal until telemetry is fresh again",
                self.hold_limit,
                extra={"event": "redline_stale", "reason": ended[0].extra.get("resource", "")},
            )
        self.expired += len(ended)
        self._host.deliver(ended)  # the runtime's sinks and callers, as observe_headroom feeds them

    def _preempt_surplus(self, resource: str) -> None:
        pre = self._preemption
        for rid in self._host.running():
            if not pre.preemptible(rid) or rid in pre.noticed:
                continue
            with contextlib.suppress(EnforcementError):  # ended between the two looks
                self._host.preempt(rid, resource=resource)
                self.preempted += 1

    async def _read_bounded(self) -> list[HeadroomSample]:
        """The source's read, the held answered at their bound before it and every ``interval`` while
        it is pending (so a held request waits at most ``hold_bound`` plus one interval)."""
        self._expire_held()
        read = asyncio.ensure_future(self._source.read())
        try:
            while not read.done():
                await asyncio.wait((read,), timeout=self.interval)
                if not read.done():
                    self._expire_held()
            return read.result()
        finally:
            read.cancel()  # the poll was cancelled mid-read (a done read is left as it is)

    def _expire_held(self) -> None:
        """Rationed: answer each request held ``hold_bound`` seconds or more (`HOLD_BOUND`)."""
        ended = self._core.expire_held(self._host.clock.now())
        self.bounded += len(ended)
        self._host.deliver(ended)

    def _preempt_fewest(self, crossing: HardFloorCrossing, config: ReliefConfig) -> None:
        """Preempt the fewest running surplus requests whose states lift the crossing resource back to
        its hard floor, counting the preemptions a fresh sample has not measured yet (module doc)."""
        core, pre = self._core, self._preemption
        if core.redline is not None:
            self._relieving.land(core.redline.last_sample_time)
        for rid in [r for r in self._generated if not core.is_live(r)]:
            del self._generated[rid]
        noticed = pre.noticed
        cands = [self._candidate(rid) for rid in self._host.running() if pre.preemptible(rid)]
        free = [c for c in cands if c.rid not in noticed]
        in_flight = self._relieving.tokens
        plan = preempt_fewest(
            free,
            headroom=crossing.smoothed,
            floor=crossing.floor,
            capacity=config.capacity,
            in_flight=in_flight,
        )
        states = {c.rid: c.state for c in free}
        for rid in plan:
            with contextlib.suppress(EnforcementError):  # ended between the two looks
                stop_at = self._host.preempt(rid, resource=crossing.resource)
                self._relieving.add(rid, crossing.resource, states[rid], max(stop_at, crossing.sample_time))
                self.preempted += 1

    def _candidate(self, rid: str) -> Candidate:
        request = self._host.request(rid)
        prompt = 0 if request is None else request.prompt_tokens or 0
        return Candidate(rid, prompt, self._generated.get(rid, 0))
