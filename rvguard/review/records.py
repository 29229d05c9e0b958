"""One pass over a trace: what each request went through, and the headroom the guard saw.

`collect` folds a trace's events into one `RequestRecord` per request (its tenant, basis, window,
deadline, L(R) and the times it was dispatched and ended) plus the headroom samples and the
demotions, which the review's checks (`rvguard.review.envelope`, `.capacity`, `.headroom`) read.
The trace is assumed well formed (``rvguard check`` judges that); an event for a rid that never
arrived is counted in `TraceSummary.orphans`, never silently dropped.

Pure: no I/O. Cost: O(1) per event; memory O(requests + samples).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..contract import Contract
from ..events import Admit, Arrive, Complete, Demote, Dispatch, Drop, Event, Fail, Reject, Restore
from ..events import Sample as SampleEvent

__all__ = ["Demotion", "RequestRecord", "Sample", "TraceSummary", "collect"]


@dataclass(slots=True)
class RequestRecord:
    """What one request went through.

    Attributes:
        rid: the request id.
        tenant: its tenant.
        arrived: arrival time.
        deadline: absolute deadline.
        lower: L(R) at its (capped) output length.
        ceiling: the service ceiling of its tenant (s_max, s_max_opp or the tenant's own).
        floored: its tenant holds a floor.
        weight: the floor credit it spends (1 with count credits).
        basis: ``floor``, ``surplus`` or ``demoted`` once admitted, else ``""``.
        dispatched: when it took a slot (NaN: never).
        ended: when it ended (NaN: not yet).
        outcome: the terminal kind (``complete``, ``fail``, ``drop``, ``reject``) or ``""``.
        reason: the terminal event's reason.
    """

    rid: str
    tenant: str
    arrived: float
    deadline: float
    lower: float
    ceiling: float
    floored: bool
    weight: float = 1.0
    basis: str = ""
    dispatched: float = math.nan
    ended: float = math.nan
    outcome: str = ""
    reason: str = ""

    @property
    def service(self) -> float | None:
        """Dispatch → completion, for a completed request (else ``None``)."""
        if self.outcome != "complete" or math.isnan(self.dispatched):
            return None
        return self.ended - self.dispatched

    @property
    def on_time(self) -> bool:
        """Completed by its deadline."""
        return self.outcome == "complete" and self.ended <= self.deadline


@dataclass(frozen=True, slots=True)
class Sample:
    """One headroom sample the guard traced: resource, raw value, its own timestamp, trace time."""

    resource: str
    value: float
    sample_time: float
    t: float


@dataclass(slots=True)
class Demotion:
    """One request held back by the redline: when, on which resource's sample, and its release."""

    rid: str
    t: float
    resource: str
    sample_time: float
    restored: float = math.nan


@dataclass
class TraceSummary:
    """Everything the review's checks read (see module doc)."""

    requests: dict[str, RequestRecord] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    demotions: list[Demotion] = field(default_factory=list)
    first: float = math.nan
    last: float = math.nan
    events: int = 0
    orphans: int = 0


def _arrive(contract: Contract, ev: Arrive) -> RequestRecord:
    tenant = contract.tenants[ev.tenant]
    deadline = ev.t + tenant.deadline if ev.deadline is None else ev.deadline
    return RequestRecord(
        rid=ev.rid,
        tenant=ev.tenant,
        arrived=ev.t,
        deadline=deadline,
        lower=contract.lower_bound(ev.max_tokens),
        ceiling=contract.ceiling(ev.tenant),
        floored=tenant.floored,
        weight=contract.weight(ev.prompt_tokens, ev.max_tokens),
    )


def _lifecycle(rec: RequestRecord, ev: Event) -> None:
    if isinstance(ev, Admit):
        rec.basis = ev.basis.value
    elif isinstance(ev, Dispatch):
        rec.dispatched = ev.t
    elif isinstance(ev, Complete | Fail | Drop | Reject):
        rec.ended, rec.outcome = ev.t, ev.kind.value
        rec.reason = "" if isinstance(ev, Complete) else ev.reason


def _node(out: TraceSummary, ev: Event, held: dict[str, Demotion]) -> bool:
    """The headroom events (``sample``, ``demote``, ``restore``); False for any other."""
    if isinstance(ev, SampleEvent):
        out.samples.append(Sample(ev.resource, ev.value, ev.sample_time, ev.t))
    elif isinstance(ev, Demote):
        held[ev.rid] = d = Demotion(ev.rid, ev.t, ev.resource, ev.sample_time)
        out.demotions.append(d)
    elif isinstance(ev, Restore):
        if ev.rid in held:
            held.pop(ev.rid).restored = ev.t
    else:
        return False
    return True


def collect(events: Iterable[Event], contract: Contract) -> TraceSummary:
    """Fold ``events`` (in trace order) into a `TraceSummary`.

    Raises:
        KeyError: an arrival of a tenant the contract lacks (the reader has refused it before).
    """
    out = TraceSummary()
    held: dict[str, Demotion] = {}
    for ev in events:
        out.events += 1
        if math.isnan(out.first):
            out.first = ev.t
        out.last = ev.t
        if _node(out, ev, held):
            continue
        if isinstance(ev, Arrive):
            out.requests[ev.rid] = _arrive(contract, ev)
            continue
        rec = out.requests.get(ev.rid)
        if rec is None:
            out.orphans += 1
            continue
        _lifecycle(rec, ev)
    return out
