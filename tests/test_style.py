"""House-style checks that a linter cannot make: size caps and a pure core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "rvguard"
MODULES = sorted(PKG.rglob("*.py"))
PURE = [p for p in MODULES if p.parent.name == "monitors"] + [
    PKG / name
    for name in (
        "lifecycle.py",
        "exact.py",
        "contract.py",
        "events.py",
        "verdict.py",
        "facts.py",
        "columnar.py",
        "enforce/core.py",
        "enforce/watch.py",
        "enforce/learners.py",
        "enforce/request.py",
        "enforce/rids.py",
    )
]
# (tests/test_imports.py checks the same modules transitively: what they load, not only what they name)
FORBIDDEN_IN_CORE = {"asyncio", "time", "z3", "httpx", "socket", "subprocess"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_module_size_cap(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 600


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_function_size_cap(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= 60, f"{path.name}:{node.lineno} {node.name} has {length} lines"


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(PKG)))
def test_core_does_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN_IN_CORE
    if path.parent.name in ("monitors", "enforce"):
        assert "pydantic" not in imported
