"""The timed-automaton engine behind every property.

Theory of operation
-------------------
A property is a `TimedAutomaton`: named locations (one marked initial, some
marked bad), a transition table ``TRANSITIONS[(location, kind)] -> edges``,
and timer edges. An edge has a guard over the instance's clocks, variables
and the event's fields, an optional update (clock resets, assignments) and
a target. The first edge whose guard holds is taken. A missing
``(location, kind)`` entry means "stay" for a *lenient* automaton and "go
bad" for a *strict* one (the protocol automaton WF): every pair is either in
the table or explicitly rejected.

Properties are parametric: one instance per request, created by the
``arrive`` event from the initial location, freed at the request's terminal
event. An instance carries the request's facts (tenant, absolute deadline D,
lower bound L, upper bound U, window, entitlement), its clocks as reset
times (a clock's value is ``now - reset``), and a dict of variables.

A bad location is final: an instance that reaches one stays there and
reacts to nothing more, unless its automaton says ``bad_is_final=False``
(RB: a surplus request dispatched over the limit still ends, and its end
must still update the shared count). The violation is reported once, when
the bad location is entered.

An automaton may also keep variables *shared* by all its instances (RB's
count of surplus requests in flight): ``shared(contract)`` makes them when a
monitor starts, and guards and updates reach them as
``inst.shared[automaton name]``.

A `Timer` is an edge taken by the passage of time: while an instance sits
in ``location``, once observed time *strictly* exceeds ``bound(instance)``
it moves to ``target``, at the instant ``bound`` (the violation time of
SF is the deadline itself, though it is learned later). Time is learned
from events and from `Monitor.advance`. "Strictly" makes an event exactly
at the bound win: a completion at t = D is on time.

The tables are data; `compile` turns them into flat lists indexed by
``location * N_KINDS + kind code`` (the codes of `rvguard.lifecycle`), so
the hot path does no hashing of enums, and the monitor fuses the compiled
automata of a request into one product state whose moves it caches
(`rvguard.monitors.product`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..events import Event, EventKind
from ..lifecycle import CODE, N_KINDS

if TYPE_CHECKING:
    from ..contract import Contract

__all__ = ["N_KINDS", "Edge", "Instance", "TimedAutomaton", "Timer", "entitled"]


class Instance:
    """One request as the monitors see it: its facts, clocks, variables and events.

    ``state`` is the request's product state (`rvguard.monitors.product`):
    its WF location and the location of each monitored property, as one int.
    ``events`` is the request's bad-prefix witness so far, in trace order.
    ``resets`` and ``vars`` are created on first use.
    """

    __slots__ = (
        "_resets",
        "_vars",
        "admitted",
        "deadline",
        "entitled",
        "events",
        "floored",
        "lower",
        "rank",
        "rid",
        "row",
        "shared",
        "state",
        "t_arrive",
        "t_dispatch",
        "tenant",
        "upper",
        "used",
        "weight",
        "window",
    )

    def __init__(
        self,
        rid: str,
        tenant: str = "",
        t_arrive: float = 0.0,
        deadline: float = math.inf,
        lower: float = 0.0,
        upper: float | None = None,
        floored: bool = False,
        weight: float = 1.0,
        window: int = 0,
        entitled: bool = False,
        rank: int = 0,
        used: float = 0.0,
    ) -> None:
        self.rid = rid
        self.tenant = tenant
        self.t_arrive = t_arrive
        self.deadline = deadline
        self.lower = lower
        self.upper = upper
        self.floored = floored
        self.weight = weight
        self.window = window
        self.entitled = entitled
        self.rank = rank
        self.used = used
        self.state = 0
        #: variables shared by all instances, per automaton name (set by the monitor)
        self.shared: dict[str, dict[str, Any]] = _NO_SHARED
        self.events: list[Event] = []
        self._resets: dict[str, float] | None = None
        self._vars: dict[str, Any] | None = None
        # bookkeeping of the metrics
        self.admitted = False
        self.t_dispatch: float | None = None
        self.row: list[int] | None = None

    @property
    def resets(self) -> dict[str, float]:
        """Clock resets: clock name -> the time it was last reset (unset = the arrival)."""
        if self._resets is None:
            self._resets = {}
        return self._resets

    @property
    def vars(self) -> dict[str, Any]:
        """The instance's integer (or other) variables, by name."""
        if self._vars is None:
            self._vars = {}
        return self._vars

    def clock(self, name: str, now: float) -> float:
        """Value of clock ``name`` at ``now`` (clocks start at the arrival)."""
        resets = self._resets
        return now - (self.t_arrive if resets is None else resets.get(name, self.t_arrive))


_NO_SHARED: dict[str, dict[str, Any]] = {}

Guard = Callable[[Instance, Event], bool]


def entitled(inst: Instance, ev: Event) -> bool:
    """Guard: the request is floor-entitled (AF and SF branch on it at ``arrive``)."""
    return inst.entitled


Update = Callable[[Instance, Event], None]
Detail = Callable[[Instance, Event | None, float], str]


@dataclass(frozen=True)
class Edge:
    """An edge of the table: taken when ``guard`` holds (``None`` = always).

    ``label`` is the guard written for people; ``detail`` (for edges into a
    bad location) builds the sentence reported with the violation.
    """

    target: Enum
    guard: Guard | None = None
    label: str = "true"
    update: Update | None = None
    detail: Detail | None = None


@dataclass(frozen=True)
class Timer:
    """A timer edge: in ``location``, once time passes ``bound(inst)``, go to ``target``."""

    location: Enum
    bound: Callable[[Instance], float]
    target: Enum
    label: str
    detail: Detail | None = None


@dataclass(frozen=True)
class TimedAutomaton:
    """A property as a timed safety automaton over one request's events.

    Attributes:
        name: the property's name in reports (``AF``, ``SF``, ...).
        locations: the location enum (or its members, in order); ``initial`` is where instances start
            (before their ``arrive`` event), ``bad`` the violating ones.
        transitions: ``(location, kind) -> edges`` tried in order.
        timers: timer edges.
        strict: a missing ``(location, kind)`` goes bad (protocol automata).
        context: facts reported with a violation (e.g. AF's entitlement count).
        shared: makes the variables all instances share (`Instance.shared`) from the contract.
        node: updates those shared variables from a node event (a ``sample``, which has no
            request and so no instance): how RL learns the freshest sample of each resource.
        bad_is_final: an instance in a bad location reacts to nothing more (False: its
            edges are still taken; the violation is reported once, on entering).
    """

    name: str
    description: str
    locations: type[Enum] | Iterable[Enum]
    initial: Enum
    bad: frozenset[Enum]
    transitions: Mapping[tuple[Enum, EventKind], Sequence[Edge]]
    timers: Sequence[Timer] = ()
    strict: bool = False
    context: Callable[[Instance], Mapping[str, Any]] | None = None
    strict_detail: Detail | None = None
    shared: Callable[[Contract], dict[str, Any]] | None = None
    bad_is_final: bool = True
    node: Callable[[dict[str, Any], Event], None] | None = None

    def compile(self) -> CompiledAutomaton:
        """Flatten the table into int-indexed lists for the hot path."""
        return CompiledAutomaton(self)


class CompiledAutomaton:
    """`TimedAutomaton` flattened: ``table[loc * N_KINDS + code]`` is a tuple of edges or None."""

    __slots__ = ("auto", "bad", "codes", "final", "index", "locs", "table", "timers")

    def __init__(self, auto: TimedAutomaton) -> None:
        self.auto = auto
        self.locs: list[Enum] = list(auto.locations)
        self.index: dict[Enum, int] = {loc: i for i, loc in enumerate(self.locs)}
        self.bad: list[bool] = [loc in auto.bad for loc in self.locs]
        #: per location: bad, and reacting to nothing more (`TimedAutomaton.bad_is_final`)
        self.final: list[bool] = [b and auto.bad_is_final for b in self.bad]
        self.table: list[tuple[tuple[int, Guard | None, Update | None, Edge], ...] | None] = [None] * (
            len(self.locs) * N_KINDS
        )
        for (loc, kind), edges in auto.transitions.items():
            slot = self.index[loc] * N_KINDS + CODE[kind]
            self.table[slot] = tuple((self.index[e.target], e.guard, e.update, e) for e in edges)
        self.timers: list[list[Timer]] = [[] for _ in self.locs]
        for timer in auto.timers:
            self.timers[self.index[timer.location]].append(timer)
        #: event codes this automaton reacts to (a strict one reacts to every kind)
        self.codes: frozenset[int] = frozenset(
            range(N_KINDS) if auto.strict else (CODE[k] for (_, k) in auto.transitions)
        )
