"""`ReliefHost`: the relief loops ask the runtime only to act, and never reach through it (STYLE 24).

Read from the source (an AST walk): in `pressure`, `emergency` and `voluntary` every use of the
host is one call or one property read on it (``self._host.preempt(...)``, ``self._host.clock``),
never an attribute of one of its parts (``guard.core.redline``, ``guard.preemption.noticed``: the
old reach two objects deep), and every name a relief module reads on its host is one the protocol
declares. The Guard satisfies the protocol (mypy checks the call that builds the loop; here, at
run time, it has each declared member).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rvguard.enforce.guard import Guard
from rvguard.enforce.host import ReliefHost

ENFORCE = Path(__file__).resolve().parents[2] / "rvguard" / "enforce"
RELIEF = ("pressure.py", "emergency.py", "voluntary.py")
DECLARED = {name for name in vars(ReliefHost) if not name.startswith("_")}
#: how relief code names the runtime it holds (``guard``: the old names, caught too)
HOLDERS = {"self._host", "host", "self._guard", "guard"}


def _host_uses(source: str) -> list[tuple[str, str | None]]:
    """Each ``HOLDER.NAME`` read, with the attribute read on its result (``None``: none)."""
    uses = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        inner = node.value
        if isinstance(inner, ast.Attribute) and ast.unparse(inner.value) in HOLDERS:
            uses.append((inner.attr, node.attr))
        elif ast.unparse(node.value) in HOLDERS:
            uses.append((node.attr, None))
    return uses


@pytest.mark.parametrize("module", RELIEF)
def test_relief_reads_only_what_the_protocol_declares_and_never_through_a_part(module: str) -> None:
    uses = _host_uses((ENFORCE / module).read_text())
    assert uses, f"{module} does not use its host at all: the test reads nothing"
    assert {name for name, _ in uses} <= DECLARED
    deep = [(name, then) for name, then in uses if then is not None and name != "clock"]
    assert deep == []  # only the clock is read through (``self._host.clock.now()``)


def test_the_walk_finds_a_reach_through_a_part() -> None:
    old = "def f(self):\n    guard = self._guard\n    return guard.core.redline, self._host.running()\n"
    assert sorted(_host_uses(old), key=str) == [("core", "redline"), ("core", None), ("running", None)]


def test_the_protocol_names_no_part_of_the_guard_and_the_guard_has_each_member() -> None:
    assert DECLARED.isdisjoint({"core", "preemption", "contract", "headroom", "shield"})
    assert all(hasattr(Guard, name) for name in DECLARED)
