"""Baseline dispatchers the guard is compared against (issue 5, "Baselines").

Why they exist: the reference study's claims are comparative. "The floor
holds" means little unless the same workload, the same learner and the same
backend *without* the floor miss. So each baseline here speaks the
simulator's `Policy` protocol and emits the same event schema as the real
`DecisionCore`, so the same monitors judge both:

* `FifoBaseline` — *unguarded*: the learner's admit bit is final for every
  tenant (no floor, no edit), dispatch in arrival order, at most C in flight.
  With `AdmitAll` it is the admit-all baseline.
* `FlowController` — GAIE-style flow control: strict priority by the
  objective the request→objective mapping hands the request, FCFS within a
  band, a concurrency limit of C, no absolute floor. ``swap`` injects the
  mapping fault (the classes trade bands). With ``shed=False`` and the
  correct mapping it is vLLM's server-side priority (``--scheduling-policy
  priority``, admit-all): non-preemptive in a slot-bound regime.
* `RateLimiter` — a static rate limit: at most ``caps[tenant]`` admissions
  per tenant per tumbling window (per-class), or ``flat`` in all (first
  come), FIFO dispatch, no floor and no learner.

Gated FIFO (the guard's admission without priority) is not here: it is the
real core, ``DecisionCore(contract, dispatch_policy="fifo")``.

Cost: O(1) per event (FIFO deque) or O(log n) (priority heap); memory
O(live requests).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping

from ..contract import Contract
from ..enforce.request import Request
from ..events import Admit, Arrive, Basis, Complete, Dispatch, Event, Fail, Proposal, Reject
from ..facts import FactsCache

__all__ = ["FifoBaseline", "FlowController", "RateLimiter"]


class _Slots:
    """Shared bookkeeping: deadlines, capped sizes, the in-flight set, the queue heap."""

    def __init__(self, contract: Contract) -> None:
        self.contract = contract
        self.facts = FactsCache(contract)
        self._running: set[str] = set()
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()

    @property
    def in_flight(self) -> int:
        """Requests holding a slot."""
        return len(self._running)

    @property
    def queue_depth(self) -> int:
        """Admitted requests waiting for a slot."""
        return len(self._heap)

    def _arrive_event(self, request: Request, proposal: Proposal, now: float) -> Arrive:
        r = request
        f = self.facts(r.tenant, r.prompt_tokens, r.max_tokens)
        return Arrive(
            now, r.rid, r.tenant, f.deadline(r.t, r.deadline), r.prompt_tokens, f.capped_tokens, proposal
        )

    def _enqueue(self, band: int, rid: str) -> None:
        heapq.heappush(self._heap, (band, next(self._seq), rid))

    def _fill(self, now: float, out: list[Event]) -> None:
        while self._heap and len(self._running) < self.contract.slots:
            rid = heapq.heappop(self._heap)[2]
            self._running.add(rid)
            out.append(Dispatch(now, rid))

    def finish(self, rid: str, now: float, *, failed: bool = False, reason: str = "") -> list[Event]:
        """A dispatched request ended: free its slot, dispatch the next in line."""
        if rid not in self._running:
            raise ValueError(f"request {rid!r} is not in flight")
        self._running.discard(rid)
        out: list[Event] = [Fail(now, rid, reason or "backend") if failed else Complete(now, rid)]
        self._fill(now, out)
        return out


class FifoBaseline(_Slots):
    """Unguarded: the learner alone decides admission; FIFO dispatch; no floor.

    Args:
        contract: used only for slots, the output cap and default deadlines —
            not for floors or tiers (that is the point).
    """

    def arrive(self, request: Request, proposal: Proposal, now: float) -> list[Event]:
        """The learner's admit bit is final."""
        arrive = self._arrive_event(request, proposal, now)
        if not proposal.admit:
            return [arrive, Reject(now, request.rid, "learner")]
        out: list[Event] = [arrive, Admit(now, request.rid, Basis.SURPLUS)]
        self._enqueue(0, request.rid)
        self._fill(now, out)
        return out


class FlowController(_Slots):
    """GAIE-style flow control: priority bands by mapped objective, no floor.

    Args:
        contract: slots, output cap, default deadlines.
        mapping: tenant → objective band (0 first); the request→objective
            mapping as deployed. Default: each tenant's contract tier.
        swap: inject the mapping fault: band ``b`` becomes ``max_band − b``.
        shed: honour the learner's reject proposals (else admit all).
    """

    def __init__(
        self,
        contract: Contract,
        *,
        mapping: Mapping[str, int] | None = None,
        swap: bool = False,
        shed: bool = True,
    ) -> None:
        super().__init__(contract)
        bands = dict(mapping) if mapping is not None else {n: t.tier for n, t in contract.tenants.items()}
        if swap:
            top = max(bands.values())
            bands = {n: top - b for n, b in bands.items()}
        self._bands = bands
        self._shed = shed

    def arrive(self, request: Request, proposal: Proposal, now: float) -> list[Event]:
        """Admit (unless the learner sheds it), queue in its mapped band."""
        arrive = self._arrive_event(request, proposal, now)
        if self._shed and not proposal.admit:
            return [arrive, Reject(now, request.rid, "learner")]
        out: list[Event] = [arrive, Admit(now, request.rid, Basis.SURPLUS)]
        self._enqueue(self._bands.get(request.tenant, max(self._bands.values())), request.rid)
        self._fill(now, out)
        return out


class RateLimiter(_Slots):
    """A static rate limit per tumbling window (the contract's epoch and W), FIFO dispatch.

    Args:
        contract: slots, output cap, deadlines, the window.
        caps: tenant → admissions per window (per-class limit); tenants not
            named are not limited.
        flat: admissions per window over every tenant together (flat limit).
    """

    def __init__(
        self, contract: Contract, *, caps: Mapping[str, int] | None = None, flat: int | None = None
    ) -> None:
        super().__init__(contract)
        if (caps is None) == (flat is None):
            raise ValueError("a rate limit needs exactly one of caps (per class) and flat")
        self._caps = dict(caps or {})
        self._flat = flat
        self._window = -1
        self._used: dict[str, int] = {}

    def arrive(self, request: Request, proposal: Proposal, now: float) -> list[Event]:
        """Admit while the request's (or the flat) budget for this window lasts; the learner is not asked."""
        arrive = self._arrive_event(request, proposal, now)
        k = math.floor((now - self.contract.epoch) / self.contract.window)
        if k != self._window:
            self._window, self._used = k, {}
        key = "*" if self._flat is not None else request.tenant
        cap = self._flat if self._flat is not None else self._caps.get(request.tenant)
        if cap is not None and self._used.get(key, 0) >= cap:
            return [arrive, Reject(now, request.rid, "rate-limit")]
        self._used[key] = self._used.get(key, 0) + 1
        out: list[Event] = [arrive, Admit(now, request.rid, Basis.SURPLUS)]
        self._enqueue(0, request.rid)
        self._fill(now, out)
        return out
