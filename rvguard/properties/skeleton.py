"""The counter skeleton of a table: when its shared counters can be judged by prefix sums.

Theory of operation
-------------------
The offline checker (`rvguard.properties.offline`) computes a tenant, a
tenant-window or a shared counter by a grouped cumsum of per-event
increments. That is exact when each event's increment can be known
without the counters' values. The skeleton decides it: over the product of
the table's locations and the lifecycle stages (the trace is WF-clean once
WF's refusals are removed, so only legal kinds follow each stage), an edge
group ``(location, kind)`` is *static* when no guard reads a counter (its
guards are evaluated on the facts, exactly) and *dynamic* otherwise; a
dynamic group must be exhaustive (a guard ``true``, some ``g`` beside
``not g``, or guards covering every truth assignment of their comparisons),
agree on its counter increments and lead to locations that
behave alike. Moore's partition refinement finds the coarsest such
classes; `Skeleton.moves` are the class-level moves the checker replays in
numpy, step by step. Assignments (``last = t``) and increments that read a
counter are not prefix sums: such a table has no skeleton (replayed).

This module is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

from ..lifecycle import CODE, KINDS, MOVES, STAGES, Stage
from .guards import Bool, BoolOp, Cmp, Expr, Not, Update, names, show
from .table import Edge, PropertyTable, Scope

__all__ = ["ClassMove", "Skeleton", "skeleton"]

State = tuple[str, Stage]


@dataclass(frozen=True)
class ClassMove:
    """What an event of one kind does from one class: ``edges`` (guard, target class, increments)
    tried in order then ``stay`` (static), or one target and increments whatever the guards (dynamic)."""

    dynamic: bool
    edges: tuple[tuple[Expr | None, int, tuple[Update, ...]], ...]
    stay: int


@dataclass(frozen=True)
class Skeleton:
    """The classes and their moves; ``initial`` is the class a request starts in."""

    initial: int
    moves: dict[tuple[int, int], ClassMove]


#: at most this many distinct comparisons in a group's guards are case-split (2**n truth assignments)
_MAX_ATOMS = 10


def _exhaustive(edges: Sequence[Edge]) -> bool:
    """Some guard of the group holds whatever the values: ``true``, a ``g`` beside ``not g``, or, as
    propositions over the guards' comparisons (each taken true or false independently: sound, since
    any values give one such assignment), every assignment satisfies a guard."""
    guards = [e.guard for e in edges]
    texts = {show(g) for g in guards}
    if "true" in texts or any(isinstance(g, Not) and show(g.arg) in texts for g in guards):
        return True
    atoms = sorted({show(c) for g in guards for c in _atoms(g)})
    if len(atoms) > _MAX_ATOMS:
        return False
    for values in product((False, True), repeat=len(atoms)):
        truth = dict(zip(atoms, values, strict=True))
        if not any(_holds(g, truth) for g in guards):
            return False
    return True


def _atoms(g: Expr) -> list[Cmp]:
    if isinstance(g, Cmp):
        return [g]
    if isinstance(g, Not):
        return _atoms(g.arg)
    if isinstance(g, BoolOp):
        return [c for a in g.args for c in _atoms(a)]
    return []


def _holds(g: Expr, truth: dict[str, bool]) -> bool:
    """``g`` under ``truth`` (each comparison's text to its value)."""
    if isinstance(g, Cmp):
        return truth[show(g)]
    if isinstance(g, Bool):
        return g.value
    if isinstance(g, Not):
        return not _holds(g.arg, truth)
    parts = (_holds(a, truth) for a in g.args)
    return all(parts) if g.op == "and" else any(parts)


def _groups(table: PropertyTable) -> dict[tuple[str, int], list[Edge]] | None:
    """Edge groups; None when a counter update is not a prefix sum or a dynamic group disagrees."""
    keyed = {c.name for c in table.counters if c.scope is not Scope.REQUEST}
    counters = {c.name for c in table.counters}
    groups: dict[tuple[str, int], list[Edge]] = {}
    for e in table.edges:
        groups.setdefault((e.source, CODE[e.kind]), []).append(e)
        for u in e.updates:
            if u.name in keyed and (u.op == "=" or set(names(u.value)) & counters):
                return None
    for edges in groups.values():
        if _dynamic(edges, counters):
            sigs = {_sig(e, keyed) for e in edges}
            if len(sigs) > 1 or not _exhaustive(edges):
                return None
    return groups


def _dynamic(edges: Sequence[Edge], counters: set[str]) -> bool:
    return any(set(names(e.guard)) & counters for e in edges)


def _sig(e: Edge, keyed: set[str]) -> tuple[Update, ...]:
    return tuple(u for u in e.updates if u.name in keyed)


def _successors(groups: dict[tuple[str, int], list[Edge]], s: State) -> dict[int, list[State]]:
    """Per legal kind code: the possible next states (each edge's target, then staying)."""
    out: dict[int, list[State]] = {}
    loc, stage = s
    for k in KINDS:
        nxt = MOVES.get((stage, k))
        if nxt is None:
            continue
        edges = groups.get((loc, CODE[k]), [])
        out[CODE[k]] = [(e.target, nxt) for e in edges] + [(loc, nxt)]
    return out


_MEMO: dict[int, tuple[PropertyTable, Skeleton | None]] = {}


def skeleton(table: PropertyTable) -> Skeleton | None:
    """The table's counter skeleton, or None when its counters need a replay (computed once per table)."""
    memo = _MEMO.get(id(table))
    if memo is None or memo[0] is not table:
        memo = _MEMO[id(table)] = (table, _skeleton(table))
    return memo[1]


def _skeleton(table: PropertyTable) -> Skeleton | None:
    groups = _groups(table)
    if groups is None:
        return None
    keyed = {c.name for c in table.counters if c.scope is not Scope.REQUEST}
    counters = {c.name for c in table.counters}
    start: State = (table.initial, STAGES[0])
    states, todo = [start], [start]
    while todo:
        for targets in _successors(groups, todo.pop()).values():
            for t in targets:
                if t not in states:
                    states.append(t)
                    todo.append(t)
    cls = _refine(states, groups, keyed, counters)
    if cls is None:
        return None
    moves: dict[tuple[int, int], ClassMove] = {}
    for s in states:
        for code, targets in _successors(groups, s).items():
            edges = groups.get((s[0], code), [])
            dyn = _dynamic(edges, counters)
            moves[(cls[s], code)] = ClassMove(
                dyn,
                tuple(
                    (None if dyn else e.guard, cls[t], _sig(e, keyed))
                    for e, t in zip(edges, targets, strict=False)
                ),
                cls[targets[-1]],
            )
    return Skeleton(cls[start], moves)


def _refine(
    states: list[State], groups: dict[tuple[str, int], list[Edge]], keyed: set[str], counters: set[str]
) -> dict[State, int] | None:
    """Moore's refinement: states alike when every kind's move agrees on increments and classes."""
    cls = dict.fromkeys(states, 0)
    while True:
        keys = {s: _key(s, cls, groups, keyed, counters) for s in states}
        order = sorted(set(keys.values()), key=repr)
        new = {s: order.index(keys[s]) for s in states}
        if len(set(new.values())) == len(set(cls.values())):
            break
        cls = new
    for s in states:
        for code, targets in _successors(groups, s).items():
            edges = groups.get((s[0], code), [])
            if _dynamic(edges, counters) and len({new[t] for t in targets[:-1]}) > 1:
                return None
    return new


def _key(
    s: State,
    cls: dict[State, int],
    groups: dict[tuple[str, int], list[Edge]],
    keyed: set[str],
    counters: set[str],
) -> tuple[object, ...]:
    row: list[object] = [cls[s]]
    for code, targets in sorted(_successors(groups, s).items()):
        edges = groups.get((s[0], code), [])
        if _dynamic(edges, counters):
            outs = frozenset(cls[t] for t in targets[:-1])
            # one increment and one class whatever the guards: alike a static move that agrees
            row.append(
                (code, (_sig(edges[0], keyed), next(iter(outs))))
                if len(outs) == 1
                else (code, _sig(edges[0], keyed), outs)
            )
        else:
            parts = tuple(
                (show(e.guard), _sig(e, keyed), cls[t]) for e, t in zip(edges, targets, strict=False)
            )
            alike = {(sig, c) for _, sig, c in parts} | {((), cls[targets[-1]])}
            # every way out agrees: the guards do not matter to the counters
            row.append((code, alike.pop()) if len(alike) == 1 else (code, parts, cls[targets[-1]]))
    return tuple(row)
