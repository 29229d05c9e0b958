"""The guard language: parsed once to a typed AST, printed back, evaluated per event and over columns."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.errors import SpecError
from rvguard.properties.guards import (
    BoolOp,
    Cmp,
    Name,
    Not,
    Num,
    Source,
    Sum,
    compile_expr,
    evaluate,
    names,
    parse_guard,
    parse_update,
    show,
)


def test_precedence_and_types() -> None:
    g = parse_guard("not a < 1 and b + 2 * c <= d or t - x == inf")
    assert isinstance(g, BoolOp) and g.op == "or"
    left, right = g.args
    assert isinstance(left, BoolOp) and left.op == "and"
    assert left.args[0] == Not(Cmp("<", Name("a"), Num(1.0)))
    assert left.args[1] == Cmp("<=", Sum("+", Name("b"), Sum("*", Num(2.0), Name("c"))), Name("d"))
    assert right == Cmp("==", Sum("-", Name("t"), Name("x")), Num(math.inf))
    assert sorted(set(names(g))) == ["a", "b", "c", "d", "t", "x"]


def test_parenthesised_arithmetic_and_boolean_groups() -> None:
    assert parse_guard("(x + 1) <= 2") == Cmp("<=", Sum("+", Name("x"), Num(1.0)), Num(2.0))
    g = parse_guard("not (x < 1 or y < 2)")
    assert isinstance(g, Not) and isinstance(g.arg, BoolOp)


@pytest.mark.parametrize(
    "text",
    [
        "x",  # no comparison
        "x * y < 1",  # not linear
        "f(x) < 1",  # no calls
        "x < 1 and",  # truncated
        "x < 1 1",  # trailing
        "x @ 1",  # unknown character
        "and < 1",  # keyword as a name
    ],
)
def test_bad_guards_name_their_field(text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_guard(text, field="edges[2].guard")
    assert err.value.field == "edges[2].guard"
    assert text.strip() in str(err.value) or "cannot read" in str(err.value)


def test_updates() -> None:
    u = parse_update("n += weight + 1")
    assert (u.name, u.op, show(u.value)) == ("n", "+=", "weight + 1")
    assert str(parse_update("last = t")) == "last = t"
    for bad in ("n", "1 = t", "n *= 2", "n = "):
        with pytest.raises(SpecError):
            parse_update(bad, field="u")


_ATOMS = st.sampled_from(["x", "y", "1", "2.5", "inf", "-x", "(x - y)", "3 * y"])
_CMPS = st.builds(
    lambda a, op, b: f"{a} {op} {b}", _ATOMS, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), _ATOMS
)
_GUARDS = st.recursive(
    _CMPS,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
    ),
    max_leaves=6,
)


@given(_GUARDS, st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=8))
def test_printed_guard_parses_back_and_both_evaluators_agree(
    text: str, points: list[tuple[int, int]]
) -> None:
    """show() is a fixpoint of parsing; the per-event closure, the per-event `Source` function and the
    column evaluator give the same truth on every point (the offline checker relies on it)."""
    g = parse_guard(text)
    assert parse_guard(show(g)) == g
    xs = np.array([float(x) for x, _ in points])
    ys = np.array([float(y) for _, y in points])
    columns = np.broadcast_to(evaluate(g, lambda n: xs if n == "x" else ys), xs.shape)
    src = Source(lambda n, _: "c[0]" if n == "x" else "c[1]")
    one = src.function("c", "return " + src.expr(g))  # the engine's: one function, not a closure tree
    for i, (x, y) in enumerate(points):
        fn = compile_expr(g, lambda n: (lambda c: c[0]) if n == "x" else (lambda c: c[1]))
        assert bool(fn((float(x), float(y)))) == bool(columns[i])
        assert bool(one((float(x), float(y)))) == bool(columns[i])
