"""House-style checks that a linter cannot make: size caps and a pure core."""

from __future__ import annotations

import ast
from pathlib import Path

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


MODULE_CAP, FUNCTION_CAP = 600, 60


def _name(path: Path) -> str:
    return str(path.relative_to(PKG))


def _module_too_long(path: Path, text: str) -> list[str]:
    lines = len(text.splitlines())
    return [f"{_name(path)}: {lines} lines (module cap {MODULE_CAP})"] if lines > MODULE_CAP else []


def _functions_too_long(path: Path, text: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_CAP:
                rule = f"(function cap {FUNCTION_CAP})"
                found.append(f"{_name(path)}:{node.lineno} {node.name} has {length} lines {rule}")
    return found


def _core_io(path: Path, text: str) -> list[str]:
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    forbidden = imported & FORBIDDEN_IN_CORE
    if path.parent.name in ("monitors", "enforce"):
        forbidden |= imported & {"pydantic"}
    return [f"{_name(path)} imports {sorted(forbidden)} (the pure core does no I/O)"] if forbidden else []


# One test per rule over every module (not one per module: ~500 tests' overhead for a few file reads);
# each failure names the module and the rule, and every offender is listed, not only the first.
def test_module_size_cap() -> None:
    assert [m for p in MODULES for m in _module_too_long(p, p.read_text())] == []


def test_function_size_cap() -> None:
    assert [m for p in MODULES for m in _functions_too_long(p, p.read_text())] == []


def test_core_does_no_io() -> None:
    assert [m for p in PURE for m in _core_io(p, p.read_text())] == []


def test_the_rules_find_an_offender() -> None:
    """Each rule flags a made-up module that breaks it (so an empty list above means no offender)."""
    path = PKG / "monitors" / "made_up.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_CAP))
    long_function = f"def f():\n{body}\n"
    assert _functions_too_long(path, long_function) == [
        f"monitors/made_up.py:1 f has {FUNCTION_CAP + 1} lines (function cap {FUNCTION_CAP})"
    ]
    assert _module_too_long(path, "x = 1\n" * (MODULE_CAP + 1)) == [
        f"monitors/made_up.py: {MODULE_CAP + 1} lines (module cap {MODULE_CAP})"
    ]
    assert _core_io(path, "import asyncio\nfrom pydantic import BaseModel\n") == [
        "monitors/made_up.py imports ['asyncio', 'pydantic'] (the pure core does no I/O)"
    ]
    assert _module_too_long(path, "x = 1\n") == _functions_too_long(path, "def f():\n    pass\n") == []
