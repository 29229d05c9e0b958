"""The public API is small and explicit: __all__ equals the public names, sorted."""

from __future__ import annotations

import subprocess
import sys

import rvguard


def test_all_equals_the_public_names() -> None:
    public = {n for n in dir(rvguard) if not n.startswith("_")} - {"annotations"}
    modules = {n for n in public if type(getattr(rvguard, n)).__name__ == "module"}
    assert set(rvguard.__all__) == public - modules
    assert list(rvguard.__all__) == sorted(rvguard.__all__)
    assert len(rvguard.__all__) <= 20


def test_import_leaves_heavy_dependencies_out() -> None:
    code = (
        "import sys, rvguard, rvguard.monitors; "
        "heavy = ('z3', 'pyarrow', 'asyncio', 'httpx', 'numpy', 'rvguard.screen'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
