"""Lazy package exports (PEP 562): an exported name's module is imported when the name is first used.

Why: the ``rvguard`` program is ``rvguard.cli:main``, so every command starts by importing
the ``rvguard`` package, and the CLI reads each package's command declarations; if importing
a package imported its modules, ``rvguard --help`` would load pydantic and numpy and
``rvguard verify`` the monitors and the screen. A package lists its exports once for type
checkers (``if typing.TYPE_CHECKING:`` imports) and once here; `tests/test_exports.py`
checks that the two agree.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["attach"]


def attach(
    package: str, exports: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``exports`` map a module to its names.

    Args:
        package: the package's ``__name__``.
        exports: relative module (``".contract"``) → the names it exports through the package.

    Returns:
        The module-level ``__getattr__`` (imports on first use, then caches the name on the
        package) and ``__dir__`` (the package's names and its exports).
    """
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
