"""Build script: the metadata is in pyproject.toml; this adds the optional compiled build (issue 16).

``RVGUARD_COMPILE=1 pip install --no-build-isolation .`` compiles the modules listed in
`rvguard._compiled.COMPILED` with mypyc (it needs mypy, setuptools and a C compiler in the
installing environment; ``--no-build-isolation`` lets the build use them). Any other build —
the default ``pip install .``, and every editable install (``pip install -e``, which must keep
running the ``.py`` sources the developer edits) — is pure Python. When the compilation fails
(no C compiler, a mypyc refusal) the build says why and falls back to pure Python; with
``RVGUARD_COMPILE=strict`` it fails instead (the differential test builds that way).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
MODE = os.environ.get("RVGUARD_COMPILE", "")
EDITABLE = {"editable_wheel", "develop"} & set(sys.argv)


def _compiled_list() -> list[str]:
    namespace: dict[str, Any] = {}
    exec((HERE / "rvguard" / "_compiled.py").read_text(encoding="utf-8"), namespace)  # stdlib only
    return list(namespace["COMPILED"])


def _say(message: str) -> None:
    print(f"rvguard build: {message}", file=sys.stderr)


def _fallback(reason: str) -> list[Any]:
    if MODE == "strict":
        raise SystemExit(f"rvguard build: RVGUARD_COMPILE=strict and {reason}")
    _say(f"{reason}; building pure Python")
    return []


def ext_modules() -> list[Any]:
    """mypyc's extension modules when asked for and possible, else none."""
    if MODE not in ("1", "strict"):
        return []
    if EDITABLE:
        _say("an editable install runs the .py sources: not compiling")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return _fallback("mypyc (from mypy) is not importable (use --no-build-isolation)")
    try:
        return list(mypycify(_compiled_list(), opt_level="3"))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - mypyc's refusal, reported and survived
        return _fallback(f"mypyc refused the sources ({exc})")


class _BuildExt(build_ext):
    """Compile, or fall back to pure Python when the C compiler fails (not with ``strict``)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no C compiler, or it failed: pure Python still works
            if MODE == "strict":
                raise
            _say(f"compiling failed ({exc}); building pure Python")
            self.extensions = []
            self.distribution.ext_modules = []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": _BuildExt})
