"""Z3 obligations generated from property tables (DESIGN §11): each proved, or shown a counterexample.

Theory of operation
-------------------
Every name a guard reads becomes a z3 Real (`_Encoder`), constrained by its
domain (`_domain`: times and sizes non-negative, flags 0/1, an admit's
``floor_credit`` its weight on the floor basis, the contract's C ≥ 1 and
0 ≤ R ≤ C, the table's parameters their values). The obligations, per table:

* **determinism** — the guards of one (location, kind) are pairwise disjoint.
* **counter invariants** — for each bound the table enforces (a good edge
  guarded ``c + e <= L`` beside its negation into bad), ``c <= L`` is proved
  by induction (k = 1) over every edge that changes ``c`` as the shield runs
  them (controllable edges into bad are never taken): base ``initial <= L``,
  step ``c <= L ∧ guard ⇒ c' <= L``. A table that bounds no counter says so
  (``counter invariants: none to prove``).
* **remedy safety** — a ``replace``/``insert`` remedy's event, from the same
  location and state, reaches no bad edge of the table (under the proved
  invariants); ``suppress``/``delay`` emit nothing and leave a good state.
* **enforceability** — no uncontrollable edge into bad has a satisfiable
  guard; else the table is monitor-only, and must say so (``monitor_only``).
* **minimality** — a remedy fires only when needed: no bad edge's guard
  overlaps a good edge's of the same location and kind, and every bad
  guard is satisfiable (a dead remedy is reported).
* **no conflict** (across tables) — an event a remedy requires (replace /
  insert of kind K) reaches no bad edge of kind K in another table.

This module imports z3 (`rvguard.verify`'s extra); it is not on any hot path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from ..lifecycle import KINDS, MOVES, STAGES, EventKind, Stage
from .guards import Bool, BoolOp, Cmp, Expr, Name, Neg, Not, Num, Sum, Term
from .table import CONTRACT_NAMES, Edge, PropertyTable

__all__ = ["Obligation", "all_hold", "check_conflicts", "check_table", "verify_tables"]


@dataclass(frozen=True)
class Obligation:
    """One obligation's verdict: ``holds``, a sentence, and the counterexample's values when not."""

    table: str
    name: str
    holds: bool
    message: str
    counterexample: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "table": self.table,
            "obligation": self.name,
            "holds": self.holds,
            "message": self.message,
            "counterexample": self.counterexample,
        }


class _Encoder:
    """Names to z3 Reals (one per name, with a suffix for a second copy) and guards to formulas."""

    def __init__(self, table: PropertyTable) -> None:
        self.table = table
        self.vars: dict[str, Any] = {}

    def var(self, name: str) -> Any:
        if name not in self.vars:
            self.vars[name] = z3.Real(name)
        return self.vars[name]

    def term(self, node: Term, rename: dict[str, Any] | None = None) -> Any:
        if isinstance(node, Num):
            return z3.RealVal(str(node.value)) if node.value != float("inf") else z3.RealVal(10**18)
        if isinstance(node, Name):
            return (rename or {}).get(node.name, self.var(node.name))
        if isinstance(node, Neg):
            return -self.term(node.arg, rename)
        left, right = self.term(node.left, rename), self.term(node.right, rename)
        return left + right if node.op == "+" else left - right if node.op == "-" else left * right

    def guard(self, node: Expr, rename: dict[str, Any] | None = None) -> Any:
        if isinstance(node, Bool):
            return z3.BoolVal(node.value)
        if isinstance(node, Not):
            return z3.Not(self.guard(node.arg, rename))
        if isinstance(node, BoolOp):
            args = [self.guard(a, rename) for a in node.args]
            return z3.And(*args) if node.op == "and" else z3.Or(*args)
        assert isinstance(node, Cmp)
        a, b = self.term(node.left, rename), self.term(node.right, rename)
        ops = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}
        return ops[node.op]

    def domain(self, kind: EventKind, basis: str | None = None) -> Any:
        """The names' domains for an event of ``kind`` (an admit's basis fixed when given)."""
        v = self.var
        facts = [v(n) >= 0 for n in ("t", "arrival", "lower", "weight", "floor", "tier", "tokens", "prompt")]
        facts += [v("arrival") <= v("t"), v("deadline") >= v("arrival"), v("upper") >= v("lower")]
        facts += [z3.Or(v("floored") == 0, v("floored") == 1)]
        facts += [v("slots") >= 1, v("reserve") >= 0, v("reserve") <= v("slots"), v("window") > 0]
        facts += [v(k) == z3.RealVal(str(x)) for k, x in self.table.params.items()]
        flags = {"floor_basis": "floor", "surplus_basis": "surplus", "demoted_basis": "demoted"}
        for name, which in flags.items():
            if kind is not EventKind.ADMIT:
                facts.append(v(name) == 0)
            elif basis is not None:
                facts.append(v(name) == (1 if basis == which else 0))
            else:
                facts.append(z3.Or(v(name) == 0, v(name) == 1))
        facts.append(sum((v(n) for n in flags), z3.RealVal(0)) <= 1)
        facts.append(z3.If(v("floor_basis") == 1, v("floor_credit") == v("weight"), v("floor_credit") == 0))
        facts.append(
            v("preempted") == 0
            if kind is not EventKind.FAIL
            else z3.Or(v("preempted") == 0, v("preempted") == 1)
        )
        decided = kind in (EventKind.ADMIT, EventKind.REJECT)  # a decision records the floor's refusal
        refused = v("floor_refused")
        facts.append(z3.Or(refused == 0, refused == 1) if decided else refused == 0)
        return z3.And(*facts)


def _model(solver: Any, enc: _Encoder, *formulas: Any) -> dict[str, str] | None:
    """A model of the formulas (the names a reader needs), or None when unsatisfiable."""
    solver.push()
    solver.add(*formulas)
    try:
        if solver.check() != z3.sat:
            return None
        m = solver.model()
        return {n: str(m.eval(x, model_completion=True)) for n, x in sorted(enc.vars.items())}
    finally:
        solver.pop()


def _groups(table: PropertyTable) -> dict[tuple[str, EventKind], list[Edge]]:
    out: dict[tuple[str, EventKind], list[Edge]] = {}
    for e in table.edges:
        out.setdefault((e.source, e.kind), []).append(e)
    return out


def _determinism(table: PropertyTable, enc: _Encoder, s: Any) -> Obligation:
    for (_, kind), edges in _groups(table).items():
        for i, a in enumerate(edges):
            for b in edges[i + 1 :]:
                cex = _model(s, enc, enc.domain(kind), enc.guard(a.guard), enc.guard(b.guard))
                if cex is not None:
                    return Obligation(table.name, "determinism", False, f"{a} and {b} both hold", cex)
    return Obligation(table.name, "determinism", True, "the guards of each location and kind are disjoint")


def _bounds(table: PropertyTable) -> list[tuple[str, Term, Edge]]:
    """``(counter, limit, edge)`` for each good edge guarded ``c + e <= L`` with its negation into bad."""
    out = []
    for edges in _groups(table).values():
        bad = [e.guard for e in edges if e.target == table.bad]
        for e in edges:
            if e.target == table.bad or Not(e.guard) not in bad:
                continue
            for cmp in _comparisons(e.guard):
                left = cmp.left
                while isinstance(left, Sum) and left.op == "+":
                    left = left.left
                counter = table.counter(left.name) if isinstance(left, Name) else None
                if cmp.op == "<=" and counter is not None and counter.scope.value != "request":
                    out.append((counter.name, cmp.right, e))
    return out


def _comparisons(g: Expr) -> Iterable[Cmp]:
    if isinstance(g, Cmp):
        yield g
    elif isinstance(g, BoolOp):
        for a in g.args:
            yield from _comparisons(a)


def _invariants(table: PropertyTable, enc: _Encoder, s: Any) -> tuple[list[Obligation], list[Any]]:
    """Each enforced bound proved by induction; the proved ones returned as assumptions too."""
    out, proved, done = [], [], set()
    for counter, limit, _ in _bounds(table):
        if (counter, limit) in done:
            continue
        done.add((counter, limit))
        c, bound = enc.var(counter), enc.term(limit)
        init = table.counter(counter).initial  # type: ignore[union-attr]
        cex = _model(s, enc, enc.domain(EventKind.ARRIVE), z3.RealVal(str(init)) > bound)
        failure = None if cex is None else ("the base case", cex)
        for e in table.edges:
            if failure or (e.target == table.bad and e.is_controllable()):
                continue  # the shield never takes a controllable edge into bad
            for u in e.updates:
                if u.name != counter:
                    continue
                step = enc.term(u.value)
                nxt = step if u.op == "=" else c + step if u.op == "+=" else c - step
                decrement = [] if u.op != "-=" else [step >= 0]
                cex = _model(
                    s, enc, enc.domain(e.kind), c <= bound, enc.guard(e.guard), nxt > bound, *decrement
                )
                failure = None if cex is None else (str(e), cex)
        name = f"invariant {counter} <= {_text(limit)}"
        if failure is None:
            out.append(
                Obligation(table.name, name, True, "proved by induction (k = 1) over the table's edges")
            )
            proved.append(c <= bound)
        else:
            out.append(Obligation(table.name, name, False, f"not inductive at {failure[0]}", failure[1]))
    if not done:  # said, not skipped: the obligation was looked for and there is nothing to prove
        counters = ", ".join(c.name for c in table.counters)
        why = f"no edge into bad bounds {counters}" if counters else "the table has no counters"
        out.append(Obligation(table.name, "counter invariants", True, f"none to prove: {why}"))
    return out, proved


def _text(term: Term) -> str:
    from .guards import show

    return show(term)


def _remedies(table: PropertyTable, enc: _Encoder, s: Any, assume: list[Any]) -> Obligation:
    groups = _groups(table)
    for e in table.edges:
        r = e.remedy
        if r is None or r.kind is None or e.target != table.bad:
            continue
        for other in groups.get((e.source, r.kind), []):
            if other.target != table.bad:
                continue
            dom = enc.domain(r.kind, r.basis)
            cex = _model(s, enc, *assume, dom, enc.guard(e.guard), enc.guard(other.guard))
            if cex is not None:
                return Obligation(
                    table.name, "remedy safety", False, f"{r} at {e} reaches bad by {other}", cex
                )
    return Obligation(
        table.name, "remedy safety", True, "no remedy's event reaches bad (suppress and delay emit none)"
    )


def _enforceable(table: PropertyTable, enc: _Encoder, s: Any, assume: list[Any]) -> Obligation:
    for e in table.edges:
        if e.target != table.bad or e.source == table.bad or e.is_controllable() or table.protocol:
            continue
        cex = _model(s, enc, *assume, enc.domain(e.kind), enc.guard(e.guard))
        if cex is not None:
            if table.monitor_only:
                return Obligation(
                    table.name, "enforceability", True, f"monitor-only (declared): {e} is uncontrollable", cex
                )
            why = f"{e} is uncontrollable and can hold: declare the table monitor_only"
            return Obligation(table.name, "enforceability", False, why, cex)
    how = (
        "refused events keep the protocol's state" if table.protocol else "only controllable events reach bad"
    )
    return Obligation(table.name, "enforceability", True, f"enforceable: {how}")


def _minimality(table: PropertyTable, enc: _Encoder, s: Any, assume: list[Any]) -> Obligation:
    for (_, kind), edges in _groups(table).items():
        good = [e for e in edges if e.target != table.bad]
        for b in (e for e in edges if e.target == table.bad and e.is_controllable()):
            if _model(s, enc, *assume, enc.domain(kind), enc.guard(b.guard)) is None:
                return Obligation(table.name, "minimality", False, f"{b} can never hold: a dead remedy")
            for g in good:
                cex = _model(s, enc, enc.domain(kind), enc.guard(b.guard), enc.guard(g.guard))
                if cex is not None:
                    return Obligation(table.name, "minimality", False, f"{b} blocks an event {g} allows", cex)
    return Obligation(table.name, "minimality", True, "every remedy fires only where no good edge holds")


def check_table(table: PropertyTable) -> list[Obligation]:
    """The five per-table obligations (the invariants first: the others assume the proved ones)."""
    enc = _Encoder(table)
    s = z3.Solver()
    for n in CONTRACT_NAMES:
        enc.var(n)
    invariants, proved = _invariants(table, enc, s)
    return [
        _determinism(table, enc, s),
        *invariants,
        _remedies(table, enc, s, proved),
        _enforceable(table, enc, s, proved),
        _minimality(table, enc, s, proved),
    ]


def _meet(a: PropertyTable, b: PropertyTable) -> set[tuple[str, str, Stage]]:
    """The (location of a, location of b, lifecycle stage) triples one request can be in, guards ignored
    (an over-approximation: every edge may be taken, or none)."""
    start = (a.initial, b.initial, STAGES[0])
    seen, todo = {start}, [start]
    while todo:
        la, lb, stage = todo.pop()
        for k in KINDS:
            nxt = MOVES.get((stage, k))
            if nxt is None:
                continue
            for ta in {la, *(e.target for e in a.edges if e.source == la and e.kind is k)}:
                for tb in {lb, *(e.target for e in b.edges if e.source == lb and e.kind is k)}:
                    if (ta, tb, nxt) not in seen:
                        seen.add((ta, tb, nxt))
                        todo.append((ta, tb, nxt))
    return seen


def _conflict(
    a: PropertyTable, e: Edge, b: PropertyTable, meet: set[tuple[str, str, Stage]]
) -> Obligation | None:
    """Whether table b refuses the event a's remedy at ``e`` requires, in a state both can be in."""
    r = e.remedy
    assert r is not None
    assert r.kind is not None
    enc, s = _Encoder(b), z3.Solver()
    for la, lb, stage in sorted(meet, key=repr):
        if la != e.source or (stage, e.kind) not in MOVES:
            continue
        for other in b.edges:
            if (
                other.source != lb
                or other.kind is not r.kind
                or other.target != b.bad
                or not other.is_controllable()
            ):
                continue
            cex = _model(s, enc, enc.domain(r.kind, r.basis), enc.guard(other.guard))
            if cex is not None:
                what = f"{a.name}'s remedy {r} (at {e}) is refused by {b.name}: {other}"
                return Obligation(f"{a.name}/{b.name}", "no conflict", False, what, cex)
    return None


def check_conflicts(tables: Sequence[PropertyTable]) -> list[Obligation]:
    """No event one table's remedy requires is refused by another (the lifecycle included: the
    required event must be legal where the remedy fires). One verdict per conflicting pair."""
    out: list[Obligation] = []
    for a in tables:
        for e in a.edges:
            r = e.remedy
            if r is None or r.kind is None:
                continue
            for b in tables:
                if b is a or b.protocol:
                    continue
                found = _conflict(a, e, b, _meet(a, b))
                if found is not None and all(o.message != found.message for o in out):
                    out.append(found)
            illegal = [
                st
                for la, _, st in _meet(a, a)
                if la == e.source and (st, e.kind) in MOVES and (st, r.kind) not in MOVES
            ]
            if illegal:
                why = f"{a.name}'s remedy {r} (at {e}) is not a legal move at stage {illegal[0].name}"
                out.append(Obligation(f"{a.name}/WF", "no conflict", False, why))
    names_ = ", ".join(t.name for t in tables)
    return out or [Obligation(names_, "no conflict", True, "no remedy's event is refused by another table")]


def verify_tables(tables: Sequence[PropertyTable]) -> list[Obligation]:
    """Every table's obligations, then the conflicts between them."""
    return [o for t in tables for o in check_table(t)] + check_conflicts(tables)


def all_hold(results: Sequence[Obligation]) -> bool:
    """Whether every obligation holds."""
    return all(r.holds for r in results)
