"""Eviction: which running surplus requests leave a node under memory pressure, and when.

Theory of operation
-------------------
A running request's accumulated state S(t) is its KV cache: prompt tokens
plus the tokens generated so far. Moving it off the node (to resume later,
here or on another engine, `rvguard.fleet.relocate`) frees S / capacity of
the node's headroom, once the move lands. Two channels decide (the runbook's
Proposition 5 and 5c):

* **Emergency** (`EvictionPlanner.emergency`, called when headroom is below
  the hard floor): candidates are the running requests that are *not*
  protected (assured or floor-entitled requests are never candidates), ranked
  by S descending (the fixed per-eviction overhead makes relief per eviction
  grow with S), ties by rid. The headroom counted is the **credited** one:
  the measured headroom plus the relief of evictions already in flight, so a
  transfer that has not landed yet is not answered by a second, redundant
  eviction. Evictions are issued off the top of the ranking while credited
  headroom is below the target, **at most k in flight**, each charged to a
  token bucket on the relocation link (rate in state tokens per second, depth
  ``link_burst``): an eviction starts only when the bucket holds its charge
  (or is full, for a state larger than the bucket), and ranking is never
  skipped to fit a smaller one. The plan also checks the deadline: the
  relief of every eviction needed to reach the target, started in rank order
  on k channels (each taking ``overhead + S / link_rate`` seconds, and each
  waiting for its bucket charge), lands at ``lands_at``; when that is after
  the node's deadline (the time the redline projects headroom to reach zero)
  or the candidates cannot reach the target at all, the plan carries a
  warning: the k-bounded serialized relief will not save the node by itself.
* **Voluntary** (`EvictionPlanner.voluntary`, any time): the crossover rule
  (`crossover`): evict when the expected remaining cost of keeping the request
  (its expected remaining service times the opportunity-cost rate of what it
  holds) exceeds the cost of moving it (a fixed overhead plus a cost per state
  token). The same k and bucket bound it, and its relief is credited too.

What is enforced here by construction (and what EV judges on a trace): at
most k evictions in flight; no emergency eviction issued while credited
headroom already reaches the target; no protected request evicted. Whether
relief lands in time is *not* enforced, only checked and warned about: it
depends on the deadline projection and on the overhead and link rate being
the true ones.

Pure: no clock (every call takes ``now``), no I/O. Cost: ``emergency`` is
O(n log n) for n candidates (the ranking) plus O(m log k) for the m needed;
``voluntary`` and ``landed`` O(1) amortised. Memory O(k).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from ..errors import SpecError
from ..exact import tokens_short
from ..runbook_spec import EvictionSpec, VoluntarySpec

__all__ = [
    "Candidate",
    "CrossoverCost",
    "EmergencyPlan",
    "Eviction",
    "EvictionConfig",
    "EvictionPlanner",
    "LinkBucket",
    "VoluntaryConfig",
    "crossover",
    "eviction_config",
    "rank",
    "voluntary_config",
]


def _require(ok: bool, field: str, value: object, why: str) -> None:
    if not ok:
        raise SpecError(
            f"eviction.{field} must be {why}, got {value!r}", field=f"eviction.{field}", value=value
        )


@dataclass(frozen=True, slots=True)
class EvictionConfig:
    """The eviction channels' fixed parameters (validated at construction).

    Attributes:
        k: evictions in flight at most (concurrent relocations on the link).
        capacity: the node's KV capacity in tokens; a request's relief is S / capacity.
        target: the headroom fraction the emergency channel restores (credited).
        overhead: control-plane seconds per eviction, whatever its size.
        link_rate: state tokens per second the relocation link moves (the bucket's rate).
        link_burst: the bucket's depth in state tokens.
    """

    k: int
    capacity: int
    target: float
    overhead: float = 0.0
    link_rate: float = math.inf
    link_burst: float = math.inf

    def __post_init__(self) -> None:
        _require(self.k >= 1, "k", self.k, "at least 1")
        _require(self.capacity >= 1, "capacity", self.capacity, "at least 1 token")
        _require(0.0 < self.target <= 1.0, "target", self.target, "a headroom fraction in (0, 1]")
        _require(0.0 <= self.overhead < math.inf, "overhead", self.overhead, "finite seconds >= 0")
        _require(self.link_rate > 0.0, "link_rate", self.link_rate, "> 0 tokens/s")
        _require(self.link_burst > 0.0, "link_burst", self.link_burst, "> 0 tokens")

    def duration(self, state: int) -> float:
        """Seconds one eviction of ``state`` tokens takes once started."""
        return self.overhead + (0.0 if math.isinf(self.link_rate) else state / self.link_rate)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running request as the planner sees it.

    Attributes:
        rid: the request.
        prompt_tokens: its prompt's tokens.
        generated: tokens generated so far.
        protected: assured or floor-entitled: never evicted.
    """

    rid: str
    prompt_tokens: int
    generated: int
    protected: bool = False

    @property
    def state(self) -> int:
        """S(t): the accumulated state, prompt plus generated tokens."""
        return self.prompt_tokens + self.generated


@dataclass(frozen=True, slots=True)
class Eviction:
    """One eviction issued: in flight from ``issued`` until `EvictionPlanner.landed`."""

    rid: str
    state: int
    relief: float  # headroom fraction it frees once landed
    issued: float
    lands: float  # expected: issued + overhead + state / link_rate
    reason: str  # "emergency" | "voluntary"


@dataclass(frozen=True, slots=True)
class EmergencyPlan:
    """What the emergency channel decided at one instant.

    Attributes:
        evict: evictions issued now (rank order).
        credited: measured headroom plus the relief in flight, after ``evict`` (as a fraction;
            the comparisons with the target are made in tokens, `EvictionPlanner._gap`).
        needed: evictions beyond those already in flight that reaching the target takes
            (``evict`` plus the ones still waiting for a channel or the bucket).
        lands_at: when the relief of all of them lands (``inf``: the target is out of reach).
        deadline: the node's deadline the plan was checked against.
        warning: ``""`` when the relief lands by the deadline, else why not.
    """

    evict: tuple[Eviction, ...]
    credited: float
    needed: int
    lands_at: float
    deadline: float
    warning: str


@dataclass(frozen=True, slots=True)
class CrossoverCost:
    """The voluntary channel's prices, in one cost unit (e.g. slot-seconds).

    Attributes:
        opportunity_rate: cost per second of keeping a request on the node.
        fixed: cost of one move, whatever its size.
        per_token: cost of moving one state token.
    """

    opportunity_rate: float
    fixed: float
    per_token: float = 0.0


@dataclass(frozen=True, slots=True)
class VoluntaryConfig:
    """The voluntary channel in the Guard: the crossover prices, and the expected seconds per
    generated token that turn a request's tokens still allowed into its expected remaining time."""

    cost: CrossoverCost
    token_seconds: float

    def __post_init__(self) -> None:
        c = self.cost
        _require(0.0 < c.opportunity_rate < math.inf, "voluntary.opportunity_rate", c.opportunity_rate, "> 0")
        _require(0.0 <= c.fixed < math.inf, "voluntary.fixed", c.fixed, "finite, >= 0")
        _require(0.0 <= c.per_token < math.inf, "voluntary.per_token", c.per_token, "finite, >= 0")
        _require(0.0 < self.token_seconds < math.inf, "voluntary.token_seconds", self.token_seconds, "> 0 s")

    def expected_remaining(self, remaining_tokens: int) -> float:
        """Expected seconds a request with ``remaining_tokens`` still allowed keeps its slot."""
        return max(0, remaining_tokens) * self.token_seconds


def crossover(cost: CrossoverCost, state: int, expected_remaining: float) -> bool:
    """The crossover rule: keeping costs more than moving (strictly)."""
    return expected_remaining * cost.opportunity_rate > cost.fixed + cost.per_token * state


def rank(candidates: Iterable[Candidate], *, exclude: Iterable[str] = ()) -> list[Candidate]:
    """The emergency ranking: unprotected candidates not in ``exclude``, S descending, then rid."""
    skip = set(exclude)
    eligible = [c for c in candidates if not c.protected and c.rid not in skip]
    return sorted(eligible, key=lambda c: (-c.state, c.rid))


class LinkBucket:
    """A token bucket on relocation bandwidth (state tokens): the link resource's budget.

    The level refills at ``rate`` up to ``burst``. A charge is allowed when the
    level holds it, or when the bucket is full (a state larger than the depth
    may still move, alone); it may leave the level negative, a debt repaid at
    ``rate``.
    """

    __slots__ = ("_level", "_t", "burst", "rate")

    def __init__(self, rate: float, burst: float, now: float = 0.0) -> None:
        self.rate, self.burst = rate, burst
        self._level, self._t = burst, now

    def level(self, now: float) -> float:
        """Tokens in the bucket at ``now`` (``now`` not before the last call's)."""
        if math.isinf(self.burst):
            return math.inf
        dt = now - self._t
        return self._level if dt <= 0.0 else min(self.burst, self._level + self.rate * dt)

    def ready_at(self, charge: float, now: float) -> float:
        """The earliest time from ``now`` at which ``charge`` is allowed."""
        need = min(charge, self.burst)
        level = self.level(now)
        return now if level >= need else now + (need - level) / self.rate

    def take(self, charge: float, now: float) -> None:
        """Charge ``charge`` tokens at ``now`` (the caller checked `ready_at`)."""
        self._level, self._t = self.level(now) - charge, now

    @property
    def last(self) -> float:
        """The time of the last charge (or of the start)."""
        return self._t

    def copy(self, now: float) -> LinkBucket:
        """This bucket as it stands at ``now``, to simulate on."""
        out = LinkBucket(self.rate, self.burst, now)
        out._level = self.level(now)
        return out

    def headroom(self, now: float) -> float:
        """The link's headroom fraction (the multi-resource redline's link resource)."""
        return 1.0 if math.isinf(self.burst) else max(0.0, self.level(now)) / self.burst


class EvictionPlanner:
    """The two eviction channels over one node (module doc), with the evictions in flight.

    Args:
        config: the fixed parameters.
        now: the time the link bucket starts full.
    """

    def __init__(self, config: EvictionConfig, *, now: float = 0.0) -> None:
        self.config = config
        self.link = LinkBucket(config.link_rate, config.link_burst, now)
        self._flight: dict[str, Eviction] = {}
        self.issued = 0
        self.warnings = 0

    @property
    def in_flight(self) -> tuple[Eviction, ...]:
        """Evictions issued and not landed yet, in issue order."""
        return tuple(self._flight.values())

    def credited(self, headroom: float) -> float:
        """Measured headroom plus the relief of the evictions in flight."""
        return headroom + sum(e.relief for e in self._flight.values())

    def emergency(
        self, now: float, headroom: float, candidates: Iterable[Candidate], *, deadline: float = math.inf
    ) -> EmergencyPlan:
        """Issue the emergency evictions due at ``now`` (module doc) and check their deadline.

        Args:
            now: the time.
            headroom: the measured headroom fraction (the redline's, smoothed or not).
            candidates: the running requests.
            deadline: when the node runs out (absolute; ``inf`` if headroom is not falling).
        """
        needed = self._needed(headroom, rank(candidates, exclude=self._flight))
        issued: list[Eviction] = []
        for c in needed:
            if len(self._flight) >= self.config.k or self.link.ready_at(c.state, now) > now:
                break
            issued.append(self._issue(c, now, "emergency"))
        lands_at = self._lands_at(now, needed[len(issued) :])
        credited = self.credited(headroom)
        short = self._gap(headroom) - sum(c.state for c in needed[len(issued) :])
        lands_at = math.inf if short > 0 else lands_at
        warning = _warning(lands_at, deadline, len(needed))
        self.warnings += bool(warning)
        return EmergencyPlan(tuple(issued), credited, len(needed), lands_at, deadline, warning)

    def voluntary(
        self, now: float, candidate: Candidate, cost: CrossoverCost, expected_remaining: float
    ) -> Eviction | None:
        """Evict ``candidate`` now when the crossover rule says so and k and the link allow."""
        c, flight = candidate, self._flight
        if c.protected or c.rid in flight or not crossover(cost, c.state, expected_remaining):
            return None
        if len(flight) >= self.config.k or self.link.ready_at(c.state, now) > now:
            return None
        return self._issue(c, now, "voluntary")

    def landed(self, rid: str) -> Eviction:
        """The eviction of ``rid`` has landed (or ended otherwise): its relief is no longer credited.

        Raises:
            KeyError: ``rid`` has no eviction in flight.
        """
        return self._flight.pop(rid)

    def _relief(self, c: Candidate) -> float:
        return c.state / self.config.capacity

    def _needed(self, headroom: float, ranked: list[Candidate]) -> list[Candidate]:
        """The top of the ranking that brings credited headroom to the target (counted in tokens:
        ``headroom·capacity + ΣS ≥ target·capacity`` on the decimals, so a tie is reached)."""
        gap, out = self._gap(headroom), []
        for c in ranked:
            if gap <= 0:
                break
            out.append(c)
            gap -= c.state
        return out

    def _gap(self, headroom: float) -> Fraction:
        """State tokens still to free before credited headroom reaches the target (≤ 0: reached),
        on the decimals (`rvguard.exact.tokens_short`: a tie is reached, as EV judges it)."""
        credited = sum(e.state for e in self._flight.values())
        return tokens_short(self.config.target, headroom, self.config.capacity, credited)

    def _issue(self, c: Candidate, now: float, reason: str) -> Eviction:
        self.link.take(c.state, now)
        ev = Eviction(c.rid, c.state, self._relief(c), now, now + self.config.duration(c.state), reason)
        self._flight[c.rid] = ev
        self.issued += 1
        return ev

    def _lands_at(self, now: float, waiting: list[Candidate]) -> float:
        """When the relief in flight and of ``waiting`` (started in order on k channels) has landed.

        Simulates on a copy of the bucket: each waiting eviction starts on the
        first channel to free up, once its charge is in the bucket.
        """
        free = [e.lands for e in self._flight.values()]
        free += [now] * (self.config.k - len(free))
        heapq.heapify(free)
        bucket = self.link.copy(now)
        last = max([now, *free])
        for c in waiting:
            start = bucket.ready_at(c.state, max(heapq.heappop(free), bucket.last))
            bucket.take(c.state, start)
            end = start + self.config.duration(c.state)
            heapq.heappush(free, end)
            last = max(last, end)
        return last

    def _check(self) -> None:
        """Assert the planner's invariants (tests call it after every step)."""
        assert len(self._flight) <= self.config.k
        assert all(e.rid == rid for rid, e in self._flight.items())


def eviction_config(spec: EvictionSpec | None) -> EvictionConfig | None:
    """The emergency channel a contract's ``eviction:`` block states, or ``None`` when the block
    (or its ``capacity`` and ``target``) is absent: then only EV's ``k`` is stated."""
    if spec is None or spec.capacity is None or spec.target is None:
        return None
    rate = math.inf if spec.link_rate is None else spec.link_rate
    burst = math.inf if spec.link_burst is None else spec.link_burst
    return EvictionConfig(spec.k, spec.capacity, spec.target, spec.overhead, rate, burst)


def voluntary_config(spec: EvictionSpec | None) -> VoluntaryConfig | None:
    """The voluntary channel a contract's ``eviction.voluntary`` block states (``None``: off)."""
    v: VoluntarySpec | None = None if spec is None else spec.voluntary
    if v is None:
        return None
    return VoluntaryConfig(CrossoverCost(v.opportunity_rate, v.fixed, v.per_token), v.token_seconds)


def _warning(lands_at: float, deadline: float, needed: int) -> str:
    if math.isinf(lands_at):
        return f"the candidates cannot bring credited headroom to the target ({needed} evictable)"
    if lands_at > deadline:
        late = f"lands at {lands_at:.3f} s, after the node's deadline {deadline:.3f} s"
        return f"the relief of {needed} eviction(s) {late}"
    return ""
