"""The checkout's ``tests`` package for the benchmarks that reuse its helpers.

The checkout goes last on ``sys.path`` (an ``rvguard`` on ``PYTHONPATH``, or installed, must win),
and a plain ``import tests`` would then find whatever top-level ``tests`` comes first: ciw, a
dependency of the simulator's benchmarks, installs one into site-packages, so ``from
tests.gateway._support import ...`` failed with "No module named 'tests.gateway'". This binds the
name to the checkout's own package before any such import.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def use_checkout_tests() -> None:
    """Make ``tests`` the checkout's ``tests/`` package (idempotent), the checkout last on the path."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    here = ROOT / "tests"
    loaded = sys.modules.get("tests")
    if loaded is not None and list(getattr(loaded, "__path__", [])) == [str(here)]:
        return
    spec = importlib.util.spec_from_file_location(
        "tests", here / "__init__.py", submodule_search_locations=[str(here)]
    )
    assert spec is not None
    assert spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["tests"] = package
    spec.loader.exec_module(package)
