"""Whose miss is it: SF misses and AF refusals attributed from the trace's own evidence (DESIGN §12).

Theory of operation
-------------------
SF holds only under the contract's preconditions (DESIGN §5), and a floor may be lowered or
refused on a recorded reason. `Attribution` reads the same events as the monitor and keeps the
evidence:

* the watch's ``alert`` records: each condition of SF (``service``, ``capacity``, ``backlog``,
  ``arrival-gap``) is broken from its ``since`` until the next ``clear``; a record's
  ``floor_scale`` is the floor factor in force from its ``t`` (a declared lowering);
* the same conditions recomputed from the requests' own events, so a trace written with no watch
  is judged too: a service above its tenant's ceiling is a break from dispatch + ceiling to its
  end (or to the trace's last time, while it still runs), and the admitted work of floored
  tenants above Σ B, or above what the shortest deadline covers (`Contract.backlog_bound`), is a
  backlog break for as long as it lasts;
* the client's faults: an entitled admitted request ended by a ``fail`` whose reason blames the
  client (``client-error``, e.g. ``client-error: disconnect``); SF already exempts these.

`Attribution.split` then sorts the monitor's violations:

* an SF miss by lateness (no completion by the deadline, or a late one) is a *precondition
  broken* when a break overlaps the request's span, from one relative deadline before its
  arrival (backlog it found waiting) to its deadline; it names the
  earliest such condition, since when, and whether the watch recorded it or it was recomputed.
  Otherwise it is a *guard fault*, and only those fail SF. A miss by a ``drop`` is judged as a
  late one (a drop is sound only when the request was doomed, and DR judges that apart: a doom the
  broken precondition caused is not the guard's); a ``fail`` (not the client's) is never excused by
  a precondition: it stays a guard fault;
* an AF violation is a *declared exception* when the refused decision records why
  (``floor_refused``: a shared pool's verdict, or ``floor-lowered`` while a recorded
  ``floor_scale`` below 1 is in force); otherwise it stays a violation.

Pure: no I/O. Memory: the breaks (a few per incident) and the live requests' dispatch times.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from typing import Any

from .contract import Contract, Entitlement
from .events import Admit, Arrive, Basis, Event, Fail, Reject, Watch, is_client_error
from .facts import FactsCache
from .lifecycle import ADMIT, ALERT, ARRIVE, COMPLETE, DISPATCH, DROP, FAIL, TERMINAL_CODES
from .verdict import Violation
from .watch_events import BACKLOG, CLEAR, FLOOR_LOWERED, FLOOR_REFUSED, NOT_PRECONDITIONS, SERVICE

__all__ = ["Attributed", "Attribution", "Break"]


@dataclass(frozen=True, slots=True)
class Break:
    """A precondition broken over ``[since, until]`` (``until`` inf: never seen to hold again)."""

    condition: str
    since: float
    until: float
    source: str  # "watch" (an alert record) or "recomputed" (from the requests' events)


@dataclass(frozen=True, slots=True)
class Attributed:
    """A violation the trace's evidence attributes: not the guard's fault.

    ``cause`` is ``precondition`` (an SF miss under a broken precondition) or ``declared`` (an AF
    refusal the trace records a reason for); ``condition`` what broke or why the floor was refused.
    """

    violation: Violation
    cause: str
    condition: str
    since: float | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The ``attributed`` item of ``check --json``."""
        return {
            **self.violation.to_dict(),
            "cause": self.cause,
            "condition": self.condition,
            "since": self.since,
            "source": self.source,
        }


class Attribution:
    """The evidence of one trace (module doc); `feed` every accepted event, then `split`."""

    def __init__(self, contract: Contract) -> None:
        self._contract = contract
        self._facts = FactsCache(contract)
        self._entitlement = Entitlement(contract)
        self._bound = contract.backlog_bound()
        self._open: dict[str, float] = {}  # condition -> since (from alert records)
        self.breaks: list[Break] = []
        self._scales: list[tuple[float, float]] = []  # (t, floor scale from t on)
        self._dispatched: dict[str, tuple[float, float]] = {}  # rid -> (dispatch t, ceiling)
        self._tenant: dict[str, str] = {}
        self._entitled: dict[str, tuple[int, int]] = {}  # live entitled rid -> (window, credit units)
        self._floor_used: dict[tuple[str, int], int] = {}  # (tenant, window) -> floor credit admitted
        self._refused: dict[str, int] = {}  # entitled rid refused the floor -> floor credit then + its own
        self._admitted: set[str] = set()  # live admitted requests of floored tenants (Q_A)
        self._backlog_since: float | None = None
        self._now = 0.0
        self.client_faults = 0

    def feed(self, ev: Event) -> None:
        """Take one event the monitor accepted."""
        self._now = ev.t
        code = ev.code
        if code == ALERT:
            self._alert(ev)  # type: ignore[arg-type]
        elif code == ARRIVE:
            self._arrive(ev)  # type: ignore[arg-type]
        elif code == ADMIT:
            self._admit(ev)  # type: ignore[arg-type]
        elif code == DISPATCH:
            tenant = self._tenant.get(ev.rid, "")
            ceiling = self._contract.ceiling(tenant) if tenant in self._contract.tenants else math.inf
            self._dispatched[ev.rid] = (ev.t, ceiling)
        elif code in TERMINAL_CODES:
            self._end(ev)

    def _arrive(self, ev: Arrive) -> None:
        self._tenant[ev.rid] = ev.tenant
        if ev.tenant not in self._contract.floored_tenants:
            return
        units = self._facts(ev.tenant, ev.prompt_tokens, ev.max_tokens).weight_units
        k, entitled, _, _ = self._entitlement.arrive(ev.tenant, ev.t, units)
        if entitled:
            self._entitled[ev.rid] = (k, units)

    def _admit(self, ev: Admit) -> None:
        tenant = self._tenant.get(ev.rid, "")
        if tenant not in self._contract.floored_tenants:
            return
        self._admitted.add(ev.rid)
        self._backlog(ev.t)
        got = self._entitled.get(ev.rid)
        if got is not None and ev.basis is Basis.FLOOR:
            key = (tenant, got[0])
            self._floor_used[key] = self._floor_used.get(key, 0) + got[1]
        elif got is not None:
            self._refuse(ev.rid, tenant)

    def _refuse(self, rid: str, tenant: str) -> None:
        """An entitled request did not get the floor: what the floor held then, with it."""
        k, units = self._entitled[rid]
        self._refused[rid] = self._floor_used.get((tenant, k), 0) + units

    def _alert(self, ev: Watch) -> None:
        if ev.floor_scale is not None:
            self._scales.append((ev.t, ev.floor_scale))
        if ev.condition == CLEAR:
            for condition, since in self._open.items():
                self.breaks.append(Break(condition, since, ev.t, "watch"))
            self._open.clear()
        elif ev.condition not in NOT_PRECONDITIONS:  # L is DR's; a shield's, an ejection's are no SF's
            since = ev.t if ev.since is None else min(ev.since, ev.t)
            self._open.setdefault(ev.condition, since)

    def _end(self, ev: Event) -> None:
        rid = ev.rid
        if isinstance(ev, Reject) and rid in self._entitled:
            self._refuse(rid, self._tenant.get(rid, ""))
        started = self._dispatched.pop(rid, None)
        if started is not None and ev.code == COMPLETE and ev.t - started[0] > started[1]:
            self.breaks.append(Break(SERVICE, started[0] + started[1], ev.t, "recomputed"))
        if isinstance(ev, Fail) and rid in self._entitled and rid in self._admitted:
            self.client_faults += is_client_error(ev.reason)
        self._entitled.pop(rid, None)
        self._tenant.pop(rid, None)
        if rid in self._admitted:
            self._admitted.discard(rid)
            self._backlog(ev.t)

    def _backlog(self, t: float) -> None:
        over = len(self._admitted) > self._bound
        if over and self._backlog_since is None:
            self._backlog_since = t
        elif not over and self._backlog_since is not None:
            self.breaks.append(Break(BACKLOG, self._backlog_since, t, "recomputed"))
            self._backlog_since = None

    def all_breaks(self) -> list[Break]:
        """The closed breaks, and those still open at the trace's last time."""
        out = list(self.breaks)
        out += [Break(c, s, math.inf, "watch") for c, s in self._open.items()]
        if self._backlog_since is not None:
            out.append(Break(BACKLOG, self._backlog_since, math.inf, "recomputed"))
        for t, ceiling in self._dispatched.values():
            if self._now - t > ceiling:
                out.append(Break(SERVICE, t + ceiling, math.inf, "recomputed"))
        return out

    def scale_at(self, t: float) -> float:
        """The floor factor recorded in force at ``t`` (1 without a recorded lowering)."""
        scale = 1.0
        for at, s in self._scales:
            if at > t:
                break
            scale = s
        return scale

    def split(self, violations: list[Violation]) -> tuple[list[Violation], list[Attributed]]:
        """The guard's faults (still violations) and the attributed rest, each in trace order."""
        breaks = sorted(self.all_breaks(), key=lambda b: (b.since, b.source != "watch"))
        sinces = [b.since for b in breaks]
        reach = list(itertools.accumulate((b.until for b in breaks), max))  # latest end so far
        faults: list[Violation] = []
        attributed: list[Attributed] = []
        for v in violations:
            if v.property == "SF":
                found = self._sf(v, breaks, sinces, reach)
            else:
                found = self._af(v) if v.property == "AF" else None
            if found is None:
                faults.append(v)
            else:
                attributed.append(found)
        return faults, attributed

    def _sf(
        self, v: Violation, breaks: list[Break], sinces: list[float], reach: list[float]
    ) -> Attributed | None:
        """The earliest break overlapping the miss's span, in O(log breaks)."""
        arrive = next((e for e in v.witness if isinstance(e, Arrive)), None)
        if arrive is None or v.witness[-1].code == FAIL:
            return None  # ended by a failure: no precondition of SF excuses it
        deadline = float(v.context.get("deadline", v.t))
        start = arrive.t - max(0.0, deadline - arrive.t)
        end = v.witness[-1].t if v.witness[-1].code == DROP else deadline  # a drop: what doomed it came first
        began = bisect.bisect_right(sinces, end)  # breaks that began by the deadline (or the drop)
        first = bisect.bisect_left(reach, start, 0, began)  # the first of them still on at ``start``
        if first >= began:
            return None
        b = breaks[first]
        return Attributed(v, "precondition", b.condition, b.since, b.source)

    def _af(self, v: Violation) -> Attributed | None:
        last = v.witness[-1] if v.witness else None
        if not isinstance(last, Admit | Reject):
            return None
        why = last.extra.get(FLOOR_REFUSED)
        if not isinstance(why, str) or not why:
            return None
        if why != FLOOR_LOWERED:
            return Attributed(v, "declared", f"credit pool refused: {why}", None, "pool")
        scale = self.scale_at(last.t)
        tenant = str(v.context.get("tenant", ""))
        if scale >= 1.0 or tenant not in self._contract.floored_tenants:
            return None  # lowered, says the decision, but no lowering was declared
        lowered = self._contract.tenants[tenant].floor * scale
        if self._contract.credit.value == "count":
            lowered = math.floor(lowered)
        if self._refused.get(v.rid, 0) <= lowered:
            return None  # the recorded floor still had room: refused against it too
        return Attributed(v, "declared", f"floor lowered to {scale:g} × B", None, "watch")
