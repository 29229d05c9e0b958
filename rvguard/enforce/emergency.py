"""The emergency eviction channel in the Guard: the planner's choices, traced, then acted on.

Theory of operation
-------------------
Past the redline's hard floor (`DecisionCore.hard_floor_crossed`), the
`HeadroomLoop` hands the crossing to `EmergencyChannel.act`. The channel
asks the pure `EvictionPlanner` (`rvguard.enforce.eviction`) which running
requests to evict now:

* **candidates** are the requests in flight that this Guard admitted as
  surplus and that are not floor-entitled (`Preemption.preemptible`, the
  same test bare preemption makes: PR's scope), each with its accumulated
  state S = prompt tokens + tokens generated so far. The Guard cannot see
  tokens stream; whoever relays them reports the count (`progress`: the
  gateway's upstream client does, chunk by chunk); a request never reported
  counts its prompt alone;
* the planner ranks them by S descending, counts the **credited** headroom
  (the smoothed headroom of the crossing resource plus the relief of the
  evictions still in flight), issues evictions only while credited headroom
  is below the target, at most ``k`` in flight, each behind the link token
  bucket;
* each eviction is written first, as an ``evict`` event (rid, state, reason
  ``emergency``, and what it was decided on: the crossing resource, its
  headroom Ĥ, the target and the capacity, and the plan's ``lands_at`` and
  ``deadline``, so EV can judge its trigger, the credited-headroom rule and the
  relief deadline from the trace) to every sink, then acted on at once: the request is
  preempted with no grace (the hard threshold evicts immediately, as the
  kubelet's does) — it ends with ``fail(preempted)`` and its caller gets the
  retry signal (`Guard.preempt`'s outcome). Written and stopped in one
  synchronous step, so nothing can end the request between the two events;
* an eviction stays **in flight** (credited) until a fresh sample of the
  crossing resource taken after it was stopped arrives (`land`): only then
  does the measured headroom include its relief, so counting it any longer
  would count it twice, and any shorter would issue a redundant eviction.
  With telemetry that stops, nothing lands and at most k stay in flight: the
  channel then waits rather than evicting blind;
* every plan checks the deadline: the node's deadline is when the dominant
  resource's trend (`Redline.view`: Ĥ and its projection over the horizon)
  reaches zero headroom (``inf`` when it is not falling, or with no horizon);
  when the k-bounded serialized relief lands after it, or the candidates
  cannot reach the target, the plan's warning is logged and counted when it
  begins or changes (`warnings`; the gateway's
  ``rvguard_eviction_deadline_warnings_total``).

Units: the planner's headroom is the crossing resource's Ĥ and a request's
relief is S / ``capacity``, so ``capacity`` is that resource's size in state
tokens: the KV cache's for ``kv_cache`` (the resource a hard floor is meant
for; a hard floor on a resource S does not measure, such as free sequence
slots, is answered in KV terms all the same).

What holds by construction: at most k evictions in flight (the planner's
bound; the trace's in-flight span, ``evict`` to ``fail``, lies inside the
planner's); no eviction while credited headroom reaches the target; no
assured or floor-entitled request, nor one this Guard did not admit, is ever
evicted; each evicted request ends exactly once, ``fail(preempted)``. What
is only checked and warned about: that the relief lands before the deadline.

Cost per plan: O(n log n) for the n requests in flight (the ranking).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..runbook_events import EMERGENCY
from .eviction import Candidate, EmergencyPlan, Eviction, EvictionConfig, EvictionPlanner
from .redline import HardFloorCrossing

if TYPE_CHECKING:
    from .core import DecisionCore
    from .host import ReliefHost
    from .preemption import Preemption

__all__ = ["EMERGENCY", "EmergencyChannel", "node_deadline"]

log = logging.getLogger("rvguard.enforce")


def node_deadline(smoothed: float, projected: float, horizon: float, sample_time: float) -> float:
    """When the trend through Ĥ (``smoothed``, and ``projected`` = Ĥ + horizon·dĤ/dt) reaches zero
    headroom; ``inf`` when it is not falling or there is no horizon to read the slope from."""
    if not horizon > 0.0 or not projected < smoothed:
        return math.inf
    slope = (projected - smoothed) / horizon
    return sample_time + max(0.0, smoothed) / -slope


_NO_RELIEF: Mapping[str, float] = MappingProxyType({})


def _relief(plan: EmergencyPlan) -> Mapping[str, float]:
    """What an emergency ``evict`` records of its plan for EV's deadline clause: when the k-bounded
    serialized relief lands and the node's deadline, both finite (a target out of reach or a node
    not falling has nothing to compare; the plan's warning says which)."""
    if math.isinf(plan.lands_at) or math.isinf(plan.deadline):
        return _NO_RELIEF
    return MappingProxyType({"lands_at": plan.lands_at, "deadline": plan.deadline})


class EmergencyChannel:
    """The planner wired to one `Guard` (see module doc).

    Args:
        host: the runtime that stops what is evicted (`ReliefHost`; the Guard).
        config: the planner's k, capacity, target, overhead and link bucket.
        core: the decision core (its redline; who is live) that carries each eviction out.
        preemption: the notices given (a request noticed already is no candidate).
        now: the Guard's time now (the link bucket starts full).

    Attributes:
        planner: the pure planner (its ``in_flight``, ``issued``).
        evicted: requests evicted (written and stopped), by either channel (`stop`).
        warnings: warnings raised: a plan whose relief cannot land before the node's deadline,
            counted (and logged) when the warning begins or changes, not on every poll it lasts.
        last_warning: the last plan's warning (``""``: it lands in time).
    """

    def __init__(
        self,
        host: ReliefHost,
        config: EvictionConfig,
        *,
        core: DecisionCore,
        preemption: Preemption,
        now: float,
    ) -> None:
        self._host, self._core, self._preemption = host, core, preemption
        self.planner = EvictionPlanner(config, now=now)
        self._generated: dict[str, int] = {}
        # rid -> (resource, the later of its stop and the last sample seen by then)
        self._stopped: dict[str, tuple[str, float]] = {}
        self.evicted = 0
        self.warnings = 0
        self.last_warning = ""

    def progress(self, rid: str, generated: int) -> None:
        """``rid`` has generated ``generated`` tokens so far (its S grows by them)."""
        if self._core.is_live(rid):
            self._generated[rid] = generated

    def candidate(self, rid: str) -> Candidate:
        """Live ``rid`` as the planner sees it: S = its prompt tokens plus the tokens reported."""
        request = self._host.request(rid)
        prompt = 0 if request is None else request.prompt_tokens or 0
        return Candidate(rid, prompt, self._generated.get(rid, 0))

    def candidates(self) -> list[Candidate]:
        """The running requests the planner may rank: surplus, this Guard's, not noticed already."""
        pre = self._preemption
        noticed = pre.noticed
        return [
            self.candidate(rid) for rid in self._host.running() if pre.preemptible(rid) and rid not in noticed
        ]

    def act(self, crossing: HardFloorCrossing, now: float) -> EmergencyPlan:
        """Plan at ``now`` for ``crossing``; trace and stop each eviction issued; warn when late."""
        self.land()
        core = self._core
        view = None if core.redline is None else core.redline.view()
        horizon = 0.0 if core.redline is None else core.redline.config.horizon
        deadline = (
            math.inf
            if view is None
            else node_deadline(view.smoothed, view.projected, horizon, view.sample_time)
        )
        plan = self.planner.emergency(now, crossing.smoothed, self.candidates(), deadline=deadline)
        if plan.warning and plan.warning != self.last_warning:  # once per episode, not per poll
            self.warnings += 1
            log.warning(
                "emergency eviction cannot relieve the node in time: %s",
                plan.warning,
                extra={"event": "eviction-deadline", "resource": crossing.resource},
            )
        self.last_warning = plan.warning
        relief = _relief(plan)
        for ev in plan.evict:
            self.stop(ev, EMERGENCY, crossing.resource, crossing.smoothed, now, relief=relief)
        return plan

    def stop(
        self,
        ev: Eviction,
        reason: str,
        resource: str,
        headroom: float,
        now: float,
        *,
        relief: Mapping[str, float] = _NO_RELIEF,
    ) -> bool:
        """Trace the planner's eviction ``ev`` (with what it was decided on: ``resource``, its
        ``headroom``, the target and capacity, and ``relief``: the plan's ``lands_at`` and
        ``deadline`` when both are finite) and stop the request; credited until it lands. False
        when a user's table forbade it (a voluntary one only): no longer in flight, nothing credited."""
        core, config = self._core, self.planner.config
        evicted = self._host.evict_now(
            ev.rid,
            ev.state,
            reason,
            resource=resource,
            headroom=headroom,
            target=config.target,
            capacity=config.capacity,
            extra=relief,
        )
        if not evicted:
            self.planner.landed(ev.rid)
            return False
        seen = -math.inf if core.redline is None else core.redline.last_sample_time(resource)
        self._stopped[ev.rid] = (resource, max(now, seen))
        self.evicted += 1
        return True

    def land(self) -> None:
        """Stop crediting each eviction a fresh sample has measured: one that came after its stop
        and was taken after it (a sample stamped ahead of the Guard's clock lands nothing early)."""
        redline = self._core.redline
        for rid, (resource, at) in list(self._stopped.items()):
            if redline is not None and redline.last_sample_time(resource) > at:
                del self._stopped[rid]
                self.planner.landed(rid)
        for rid in [r for r in self._generated if not self._core.is_live(r)]:
            del self._generated[rid]
