"""The property table: one declarative definition per safety property (DESIGN §11).

Theory of operation
-------------------
A `PropertyTable` is a timed safety automaton written as data:

* **locations**, one ``initial`` and one ``bad``; an instance per request
  starts in ``initial`` at its ``arrive`` (the arrive's own edges are taken
  from there);
* **counters** by scope: ``request`` (one per request), ``tenant`` (one per
  tenant), ``tenant_window`` (one per tenant and contract window *of the
  request's arrival*) and ``shared`` (one for the whole trace);
* **names** a guard may read (`NAMES`): the event's time ``t`` and event
  facts, the request's facts fixed at its arrival, the contract's
  parameters, the table's own ``params`` and its counters;
* **edges** ``(source, kind) -> target`` tried in table order, the first
  whose guard holds is taken, with its updates (all right-hand sides read
  the state before the event); no edge means the instance stays;
* a **remedy** on each edge into ``bad`` by a controllable event: what the
  shield does instead of emitting it (`Remedy`).

Events are *controllable* (the guard decides them: `CONTROLLABLE`) or not
(the world does: arrive, complete, fail, sample). An edge may say
``controllable: true`` for an event of an uncontrollable kind that the
guard itself causes on that edge (``fail`` with reason ``preempted``).

A *protocol* table (WF) refuses the events that reach its bad location:
reported, and nothing changes anywhere (rejection is atomic).

The table is parsed once (`rvguard.properties.load` for YAML, `edge` for
Python) and checked here: every name known, every location declared, every
controllable edge into bad remedied. This module is pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from ..errors import SpecError
from ..lifecycle import NODE_KINDS, EventKind
from .guards import Expr, Update, names, parse_guard, parse_update, show

__all__ = [
    "CONTRACT_NAMES",
    "CONTROLLABLE",
    "EVENT_NAMES",
    "FACT_NAMES",
    "GUARD_ENDS",
    "Counter",
    "Edge",
    "PropertyTable",
    "Remedy",
    "RemedyAction",
    "Scope",
    "edge",
]

#: the ``fail`` reasons the guard writes when it ends a request by itself (PR's "guard-caused" end,
#: written here from the design: bare preemption and eviction, a shutdown past the drain, surplus held
#: past the redline's hold limit or relief's hold bound, the guard's process interrupted under a request)
GUARD_ENDS: frozenset[str] = frozenset(
    {
        "preempted",
        "hold-bound",
        "shutdown",
        "redline-stale",
        "KeyboardInterrupt",
        "SystemExit",
        "GeneratorExit",
    }
)

K = EventKind
#: the kinds the guard decides (DESIGN §11); restore and relocate are the guard's own acts too
CONTROLLABLE = frozenset(
    {K.ADMIT, K.REJECT, K.DISPATCH, K.DROP, K.DEMOTE, K.EVICT, K.ROUTE, K.RESTORE, K.RELOCATE}
)

#: names read from the event itself
EVENT_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "t": "the event's time",
        "floor_basis": "1 if the event is an admit with basis floor, else 0",
        "surplus_basis": "1 if the event is an admit with basis surplus, else 0",
        "demoted_basis": "1 if the event is an admit with basis demoted, else 0",
        "floor_credit": "the request's credit (weight) if the event is an admit with basis floor, else 0",
        "preempted": "1 if the event is a fail the guard caused (GUARD_ENDS), else 0",
        "floor_refused": "1 if the event records a declared refusal of the floor (its floor_refused field: "
        "a shared pool's refusal, a declared lowering), else 0",
    }
)
#: names read from the request, fixed at its arrival (`rvguard.facts`)
FACT_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "arrival": "the request's arrival time",
        "deadline": "its absolute deadline D(R)",
        "lower": "the service lower bound L(R)",
        "upper": "the service upper bound U(R) (inf without one)",
        "weight": "the floor credit it spends, in the contract's credit units (1 with count credits)",
        "floor": "its tenant's floor B, in the same units (0: none)",
        "floored": "1 if its tenant holds a floor, else 0",
        "tier": "its tenant's tier",
        "tokens": "its output tokens after the contract's cap",
        "prompt": "its prompt tokens (0 when unknown)",
    }
)
#: names read from the contract
CONTRACT_NAMES: Mapping[str, str] = MappingProxyType(
    {"slots": "the backend slots C", "reserve": "the reserved buffer R", "window": "the window W (s)"}
)


class Scope(StrEnum):
    """Whose a counter is."""

    REQUEST = "request"
    TENANT = "tenant"
    TENANT_WINDOW = "tenant_window"
    SHARED = "shared"


class RemedyAction(StrEnum):
    """What the shield does with an event that would reach bad."""

    SUPPRESS = "suppress"  # do not emit; the request stays where it was
    DELAY = "delay"  # keep it queued; the caller retries when an input changes
    REPLACE = "replace"  # emit another event instead (reject → admit on the floor)
    INSERT = "insert"  # emit another event first, then the event (re-checked)


@dataclass(frozen=True, slots=True)
class Remedy:
    """A remedy; ``kind`` (and ``basis`` for an admit) name the event of replace / insert."""

    action: RemedyAction
    kind: EventKind | None = None
    basis: str | None = None

    def __str__(self) -> str:
        if self.kind is None:
            return self.action.value
        return f"{self.action.value}: {self.kind.value}" + (f" ({self.basis})" if self.basis else "")


@dataclass(frozen=True, slots=True)
class Counter:
    """A counter: its name, scope and initial value."""

    name: str
    scope: Scope
    initial: float = 0.0


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge: ``source --kind [guard] / updates--> target``, with its remedy if it goes bad.

    ``where`` names the edge in errors and reports (``edges[3]``, or ``file:line``).
    """

    source: str
    kind: EventKind
    target: str
    guard: Expr
    updates: tuple[Update, ...] = ()
    remedy: Remedy | None = None
    controllable: bool | None = None
    where: str = ""

    @property
    def guard_text(self) -> str:
        """The guard as written (reports print it)."""
        return show(self.guard)

    def is_controllable(self) -> bool:
        """Whether the event on this edge is the guard's own decision."""
        return self.kind in CONTROLLABLE if self.controllable is None else self.controllable

    def __str__(self) -> str:
        ups = f" / {', '.join(map(str, self.updates))}" if self.updates else ""
        return f"{self.source} --{self.kind.value} [{self.guard_text}]{ups}--> {self.target}"


def edge(
    source: str,
    kind: str | EventKind,
    target: str,
    guard: str = "",
    updates: Sequence[str] = (),
    remedy: str | Remedy | None = None,
    *,
    controllable: bool | None = None,
    where: str = "",
) -> Edge:
    """Build an edge from text, as a table written in Python does (guards parsed here, once).

    ``remedy``: ``suppress``, ``delay``, ``replace: admit floor``, ``insert: demote``.

    Raises:
        SpecError: a bad kind, guard, update or remedy (``field`` names it).
    """
    where = where or f"{source} --{kind}"
    try:
        k = EventKind(kind)
    except ValueError:
        raise SpecError(f"{where}: unknown event kind {kind!r}", field=f"{where}.kind", value=kind) from None
    g = parse_guard(guard, field=f"{where}.guard")
    ups = tuple(parse_update(u, field=f"{where}.updates") for u in updates)
    rem = remedy if remedy is None or isinstance(remedy, Remedy) else parse_remedy(remedy, f"{where}.remedy")
    return Edge(source, k, target, g, ups, rem, controllable, where)


def parse_remedy(text: str, field: str) -> Remedy:
    """``suppress`` | ``delay`` | ``replace: KIND [BASIS]`` | ``insert: KIND [BASIS]``."""
    head, _, rest = text.partition(":")
    try:
        action = RemedyAction(head.strip())
    except ValueError:
        raise SpecError(
            f"unknown remedy {text!r} (suppress, delay, replace: kind, insert: kind)", field=field
        ) from None
    words = rest.split()
    if action in (RemedyAction.SUPPRESS, RemedyAction.DELAY):
        if words:
            raise SpecError(f"remedy {action.value} takes no event kind", field=field, value=text)
        return Remedy(action)
    if not words or len(words) > 2 or words[0] not in {k.value for k in K}:
        raise SpecError(f"remedy {action.value} needs an event kind: {text!r}", field=field, value=text)
    basis = words[1] if len(words) == 2 else None
    if basis is not None and basis not in ("floor", "surplus", "demoted"):
        raise SpecError(f"unknown admission basis {basis!r}", field=field, value=text)
    return Remedy(action, EventKind(words[0]), basis)


@dataclass(frozen=True)
class PropertyTable:
    """A property as a table (see the module docstring); checked when built.

    Attributes:
        monitor_only: declared not enforceable (its bad is reachable by events the guard does not
            decide, e.g. SF's late completion); the shield only monitors it.
        protocol: a bad edge refuses its event (WF).
    """

    name: str
    description: str
    locations: tuple[str, ...]
    initial: str
    bad: str
    edges: tuple[Edge, ...]
    counters: tuple[Counter, ...] = ()
    params: Mapping[str, float] = field(default_factory=dict)
    monitor_only: bool = False
    protocol: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        problems = self._problems()
        if problems:
            where = f"{self.source}: " if self.source else ""
            raise SpecError(
                f"{where}property {self.name}: " + "; ".join(p for p, _ in problems),
                field=problems[0][1],
                errors=[SpecError(p, field=f) for p, f in problems],
            )

    def counter(self, name: str) -> Counter | None:
        """The counter called ``name``, if any."""
        return next((c for c in self.counters if c.name == name), None)

    def known_names(self) -> frozenset[str]:
        """Every name this table's guards may read."""
        return frozenset(
            {*EVENT_NAMES, *FACT_NAMES, *CONTRACT_NAMES, *self.params, *(c.name for c in self.counters)}
        )

    def _problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        locs = set(self.locations)
        if len(locs) != len(self.locations):
            out.append(("a location is declared twice", "locations"))
        for what, loc in (("initial", self.initial), ("bad", self.bad)):
            if loc not in locs:
                out.append((f"{what} location {loc!r} is not among the locations", what))
        clash = {c.name for c in self.counters} & (
            {*EVENT_NAMES, *FACT_NAMES, *CONTRACT_NAMES} | set(self.params)
        )
        out += [(f"counter {n!r} shadows a fact or parameter", "counters") for n in sorted(clash)]
        out += [
            (f"parameter {n!r} is not a finite number", f"params.{n}")
            for n, v in self.params.items()
            if not _num(v)
        ]
        for e in self.edges:
            out += self._edge_problems(e, locs)
        return out

    def _edge_problems(self, e: Edge, locs: set[str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        where = e.where
        for end in (e.source, e.target):
            if end not in locs:
                out.append((f"{where}: location {end!r} is not declared", f"{where}.target"))
        if e.kind in NODE_KINDS:
            out.append((f"{where}: {e.kind.value} concerns no request", f"{where}.kind"))
        known = self.known_names()
        unknown = sorted({n for n in names(e.guard) if n not in known})
        unknown += sorted({n for u in e.updates for n in names(u.value) if n not in known})
        out += [(f"{where}: unknown name {n!r}", f"{where}.guard") for n in unknown]
        for u in e.updates:
            if self.counter(u.name) is None:
                out.append((f"{where}: update of {u.name!r}, which is no counter", f"{where}.updates"))
        into_bad = e.target == self.bad and e.source != self.bad and e.is_controllable()
        if into_bad and not self.monitor_only and e.remedy is None:
            out.append((f"{where}: a controllable edge into bad needs a remedy", f"{where}.remedy"))
        return out


def _num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
