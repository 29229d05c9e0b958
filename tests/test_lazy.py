"""Lazy package exports: each name loads on first use, and the type checkers' list agrees with the map."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

LAZY = ("rvguard", "rvguard.enforce", "rvguard.screen", "rvguard.verify")


def _checked_imports(package: types.ModuleType) -> dict[str, str]:
    """name → relative module, from the package's ``if typing.TYPE_CHECKING:`` imports."""
    tree = ast.parse(Path(str(package.__file__)).read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "typing.TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                found |= {a.asname or a.name: "." * imp.level + (imp.module or "") for a in imp.names}
    return found


@pytest.mark.parametrize("name", LAZY)
def test_the_type_checked_imports_are_the_lazy_exports(name: str) -> None:
    package = importlib.import_module(name)
    checked = _checked_imports(package)
    assert set(checked) == set(package.__all__)
    for export, module in checked.items():
        assert getattr(package, export) is getattr(importlib.import_module(module, name), export)
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("name", LAZY)
def test_importing_the_package_imports_none_of_its_modules(name: str) -> None:
    code = f"import sys, {name}; print(sorted(m for m in sys.modules if m.startswith('rvguard')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    allowed = {"rvguard", "rvguard._lazy", "rvguard._compiled", name}  # _compiled: with RVGUARD_PURE=1
    assert set(ast.literal_eval(out.stdout)) <= allowed


def test_an_unknown_name_is_an_attribute_error() -> None:
    import rvguard

    with pytest.raises(AttributeError, match="'rvguard' has no attribute 'Contracts'"):
        _ = rvguard.Contracts  # type: ignore[attr-defined]
