"""The guard language of property tables: linear arithmetic over names, parsed once to a typed AST.

Theory of operation
-------------------
A guard is a boolean formula over *names* (the event's time ``t``, request
facts, event facts, contract and table parameters, counters), numbers and
``inf``; an update is ``name = e``, ``name += e`` or ``name -= e``. The
grammar, loosest first::

    guard  := disj
    disj   := conj ('or' conj)*
    conj   := neg ('and' neg)*
    neg    := 'not' neg | 'true' | 'false' | cmp
    cmp    := sum ('==' | '!=' | '<' | '<=' | '>' | '>=') sum | '(' guard ')'
    sum    := term (('+' | '-') term)*
    term   := unary ('*' unary)*          (at most one factor not a number: linear)
    unary  := '-' unary | NUMBER | 'inf' | NAME | '(' sum ')'

There are no calls: every guard is a formula of linear real arithmetic, so
the same AST is evaluated per event (`compile_expr`), over numpy columns
(`evaluate`, used by the offline checker) and handed to Z3
(`rvguard.properties.obligations`). `show` prints a node back in the same
language: reports print the guard as written.

This module is pure: no I/O, no numpy (the column evaluator works on any
values with the arithmetic operators; numpy arrays are such values).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..errors import SpecError

__all__ = [
    "SOURCE_DEPTH",
    "Bool",
    "BoolOp",
    "Cmp",
    "Expr",
    "Name",
    "Neg",
    "Not",
    "Num",
    "Source",
    "Sum",
    "Update",
    "compile_expr",
    "depth",
    "evaluate",
    "names",
    "parse_guard",
    "parse_term",
    "parse_update",
    "show",
]


@dataclass(frozen=True, slots=True)
class Num:
    """A number (``inf`` included)."""

    value: float


@dataclass(frozen=True, slots=True)
class Name:
    """A name: ``t``, a fact, a parameter or a counter (resolved when a table is bound)."""

    name: str


@dataclass(frozen=True, slots=True)
class Neg:
    """``-e``."""

    arg: Term


@dataclass(frozen=True, slots=True)
class Sum:
    """``left op right`` with ``op`` one of ``+ - *`` (``*``: one side is a number)."""

    op: str
    left: Term
    right: Term


@dataclass(frozen=True, slots=True)
class Cmp:
    """``left op right``, ``op`` one of ``== != < <= > >=``."""

    op: str
    left: Term
    right: Term


@dataclass(frozen=True, slots=True)
class Bool:
    """``true`` or ``false``."""

    value: bool


@dataclass(frozen=True, slots=True)
class Not:
    """``not e``."""

    arg: Expr


@dataclass(frozen=True, slots=True)
class BoolOp:
    """``a and b and ...`` or ``a or b or ...``."""

    op: str
    args: tuple[Expr, ...]


Term: TypeAlias = Num | Name | Neg | Sum
Expr: TypeAlias = Cmp | Bool | Not | BoolOp


@dataclass(frozen=True, slots=True)
class Update:
    """``name op value``, ``op`` one of ``=``, ``+=``, ``-=``."""

    name: str
    op: str
    value: Term

    def __str__(self) -> str:
        return f"{self.name} {self.op} {show(self.value)}"


_TOKEN = re.compile(
    r"\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)|([A-Za-z_][A-Za-z0-9_]*)|(==|!=|<=|>=|\+=|-=|[-+*<>()=]))"
)
_KEYWORDS = frozenset({"and", "or", "not", "true", "false", "inf"})
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")


def _tokens(text: str, field: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SpecError(f"cannot read {text[pos:].strip()[:20]!r} in {text!r}", field=field, value=text)
        out.append(m.group(m.lastindex or 0))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, field: str) -> None:
        self.text = text
        self.field = field
        self.toks = _tokens(text, field)
        self.i = 0

    def fail(self, why: str) -> SpecError:
        return SpecError(f"{why} in {self.text!r}", field=self.field, value=self.text)

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise self.fail(f"expected {expected or 'more'}, found {tok or 'the end'}")
        self.i += 1
        return tok

    def end(self) -> None:
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()!r}")

    def disj(self) -> Expr:
        args = [self.conj()]
        while self.peek() == "or":
            self.take()
            args.append(self.conj())
        return args[0] if len(args) == 1 else BoolOp("or", tuple(args))

    def conj(self) -> Expr:
        args = [self.neg()]
        while self.peek() == "and":
            self.take()
            args.append(self.neg())
        return args[0] if len(args) == 1 else BoolOp("and", tuple(args))

    def neg(self) -> Expr:
        tok = self.peek()
        if tok == "not":
            self.take()
            return Not(self.neg())
        if tok in ("true", "false"):
            self.take()
            return Bool(tok == "true")
        if tok == "(" and self._bool_group():
            self.take("(")
            inner = self.disj()
            self.take(")")
            return inner
        left = self.sum()
        op = self.peek()
        if op not in CMP_OPS:
            raise self.fail(
                "a guard needs a comparison (== != < <= > >=)" if op is None else f"unexpected {op!r}"
            )
        self.take()
        return Cmp(op, left, self.sum())

    def _bool_group(self) -> bool:
        """Whether the parenthesis at the cursor opens a boolean group (it holds a comparison or a
        boolean word at depth one) rather than an arithmetic one."""
        depth = 0
        for tok in self.toks[self.i :]:
            depth += tok == "("
            depth -= tok == ")"
            if depth == 0:
                return False
            if depth == 1 and (tok in CMP_OPS or tok in ("and", "or", "not", "true", "false")):
                return True
        return False

    def sum(self) -> Term:
        left = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            left = Sum(op, left, self.term())
        return left

    def term(self) -> Term:
        left = self.unary()
        while self.peek() == "*":
            self.take()
            right = self.unary()
            if not (_constant(left) or _constant(right)):
                raise self.fail("only a number may multiply (guards are linear)")
            left = Sum("*", left, right)
        return left

    def unary(self) -> Term:
        tok = self.take()
        if tok == "-":
            return Neg(self.unary())
        if tok == "(":
            inner = self.sum()
            self.take(")")
            return inner
        if tok == "inf":
            return Num(math.inf)
        if tok[0].isdigit() or tok[0] == ".":
            return Num(float(tok))
        if tok[0].isalpha() or tok[0] == "_":
            if tok in _KEYWORDS:
                raise self.fail(f"{tok!r} where a number or a name belongs")
            return Name(tok)
        raise self.fail(f"unexpected {tok!r}")


def _constant(term: Term) -> bool:
    if isinstance(term, Num):
        return True
    if isinstance(term, Neg):
        return _constant(term.arg)
    if isinstance(term, Sum):
        return _constant(term.left) and _constant(term.right)
    return False


def parse_guard(text: str, field: str = "guard") -> Expr:
    """Parse a guard (empty text or ``true``: always).

    Raises:
        SpecError: the text is not a guard; ``field`` names where it came from.
    """
    if not text.strip():
        return Bool(True)
    p = _Parser(text, field)
    expr = p.disj()
    p.end()
    return expr


def parse_term(text: str, field: str = "value") -> Term:
    """Parse an arithmetic term (an update's right-hand side)."""
    p = _Parser(text, field)
    term = p.sum()
    p.end()
    return term


def parse_update(text: str, field: str = "update") -> Update:
    """Parse ``name = e``, ``name += e`` or ``name -= e``."""
    p = _Parser(text, field)
    name = p.take()
    if not (name[0].isalpha() or name[0] == "_") or name in _KEYWORDS:
        raise p.fail("an update starts with the name it sets")
    op = p.take()
    if op not in ("=", "+=", "-="):
        raise p.fail("an update is name = e, name += e or name -= e")
    value = p.sum()
    p.end()
    return Update(name, op, value)


def names(node: Expr | Term) -> Iterator[str]:
    """Every name a guard or term reads."""
    if isinstance(node, Name):
        yield node.name
    elif isinstance(node, Neg | Not):
        yield from names(node.arg)
    elif isinstance(node, Sum | Cmp):
        yield from names(node.left)
        yield from names(node.right)
    elif isinstance(node, BoolOp):
        for arg in node.args:
            yield from names(arg)


def show(node: Expr | Term, top: bool = True) -> str:
    """The node written back in the guard language (what reports print)."""
    if isinstance(node, Num):
        return "inf" if node.value == math.inf else f"{node.value:g}"
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Neg):
        return f"-{show(node.arg, False)}"
    if isinstance(node, Bool):
        return "true" if node.value else "false"
    if isinstance(node, Not):
        return f"not ({show(node.arg)})" if isinstance(node.arg, Cmp | BoolOp) else f"not {show(node.arg)}"
    if isinstance(node, BoolOp):
        text = f" {node.op} ".join(show(a, False) for a in node.args)
        return text if top else f"({text})"
    if isinstance(node, Cmp):
        return f"{show(node.left)} {node.op} {show(node.right)}"
    left = show(node.left, node.op != "*")  # sums associate to the left: a + b - c
    text = f"{left} {node.op} {show(node.right, False)}"
    return text if top else f"({text})"


_ARITH: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

Ctx = Any
Getter = Callable[[Ctx], Any]


def compile_expr(node: Expr | Term, lookup: Callable[[str], Getter]) -> Getter:
    """A closure evaluating ``node`` on a context; ``lookup(name)`` gives each name's getter (bound
    once, when a table meets a contract: names are never looked up per event)."""
    if isinstance(node, Num | Bool):
        value = node.value
        return lambda ctx: value
    if isinstance(node, Name):
        return lookup(node.name)
    if isinstance(node, Neg):
        arg = compile_expr(node.arg, lookup)
        return lambda ctx: -arg(ctx)
    if isinstance(node, Not):
        inner = compile_expr(node.arg, lookup)
        return lambda ctx: not inner(ctx)
    if isinstance(node, BoolOp):
        args = tuple(compile_expr(a, lookup) for a in node.args)
        if len(args) == 2:
            first, second = args
            if node.op == "and":
                return lambda ctx: first(ctx) and second(ctx)
            return lambda ctx: first(ctx) or second(ctx)
        if node.op == "and":
            return lambda ctx: all(a(ctx) for a in args)
        return lambda ctx: any(a(ctx) for a in args)
    fn = (_ARITH if isinstance(node, Sum) else _CMP)[node.op]
    left, right = compile_expr(node.left, lookup), compile_expr(node.right, lookup)
    return lambda ctx: fn(left(ctx), right(ctx))


def depth(node: Expr | Term) -> int:
    """The nesting depth of ``node`` (a name or a number: 1)."""
    if isinstance(node, Neg | Not):
        return 1 + depth(node.arg)
    if isinstance(node, Sum | Cmp):
        return 1 + max(depth(node.left), depth(node.right))
    if isinstance(node, BoolOp):
        return 1 + max(depth(a) for a in node.args)
    return 1


#: the deepest guard or term `Source` writes as one expression (Python's parser refuses 200 nested
#: parentheses; deeper ones are compiled to closures, `compile_expr`)
SOURCE_DEPTH = 48


class Source:
    """Python source evaluating guards and terms on a context ``c``, compiled once to one function.

    A guard compiled by `compile_expr` is a tree of closures, one call per node; here it is one
    expression, ``floored == 1 and used + weight <= floor`` a single call. ``name_source(name,
    self)`` gives each name's fragment (``c.t``, a counter's ``c.store.get(...)``). Every value — a
    number, a name's text, a getter — is bound to an identifier of its own (`bind`: ``v0``, ``v1``,
    ...): the source holds nothing of the table's text, only these identifiers, ``c`` and its
    attributes, the operators of the language and parentheses. Evaluation order and results are
    `compile_expr`'s (left before right; ``and``/``or`` short-circuit; the same operators on the
    same values).
    """

    def __init__(self, name_source: Callable[[str, Source], str]) -> None:
        #: the globals of every function compiled here (one dict: a table's functions share it)
        self.env: dict[str, Any] = {"__builtins__": {}}
        self._name_source = name_source
        self._bound = 0

    def bind(self, value: Any) -> str:
        """An identifier the compiled code reads ``value`` by."""
        ident = f"v{self._bound}"
        self._bound += 1
        self.env[ident] = value
        return ident

    def expr(self, node: Expr | Term) -> str:
        """``node`` as one parenthesised Python expression over ``c``."""
        if isinstance(node, Num | Bool):
            return self.bind(node.value)
        if isinstance(node, Name):
            return self._name_source(node.name, self)
        if isinstance(node, Neg):
            return f"(-{self.expr(node.arg)})"
        if isinstance(node, Not):
            return f"(not {self.expr(node.arg)})"
        if isinstance(node, BoolOp):
            joint = " and " if node.op == "and" else " or "
            return "(" + joint.join(self.expr(a) for a in node.args) + ")"
        if node.op not in (_ARITH if isinstance(node, Sum) else _CMP):  # the language's operators only
            raise KeyError(node.op)  # as `compile_expr` does
        return f"({self.expr(node.left)} {node.op} {self.expr(node.right)})"

    def function(self, params: str, body: str) -> Callable[..., Any]:
        """``def f(params): body`` compiled with the bound values as its globals (no builtins)."""
        text = f"def f({params}):\n    " + body.replace("\n", "\n    ")
        exec(compile(text, "<rvguard.properties guard>", "exec"), self.env)
        return self.env.pop("f")  # type: ignore[no-any-return]


def evaluate(node: Expr | Term, env: Callable[[str], Any]) -> Any:
    """Evaluate ``node`` over column values (numpy arrays, or plain numbers): ``env(name)`` gives a
    name's column; ``and``/``or``/``not`` are the element-wise ``& | ~`` of boolean arrays."""
    if isinstance(node, Num | Bool):
        return node.value
    if isinstance(node, Name):
        return env(node.name)
    if isinstance(node, Neg):
        return -evaluate(node.arg, env)
    if isinstance(node, Not):
        return ~_as_bool(evaluate(node.arg, env))
    if isinstance(node, BoolOp):
        vals = [_as_bool(evaluate(a, env)) for a in node.args]
        out = vals[0]
        for v in vals[1:]:
            out = (out & v) if node.op == "and" else (out | v)
        return out
    fn = (_ARITH if isinstance(node, Sum) else _CMP)[node.op]
    return fn(evaluate(node.left, env), evaluate(node.right, env))


def _as_bool(value: Any) -> Any:
    """A plain bool as one that ``~`` negates logically (numpy's bool_); arrays unchanged."""
    if isinstance(value, bool):
        import numpy as np  # only reached for constant guards in the column evaluator

        return np.bool_(value)
    return value
