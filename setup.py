"""Build script: the metadata is in pyproject.toml; this adds the compiled build (issues 16, 30).

A plain ``pip install .`` (or ``pip wheel .``, or an sdist installed by pip) compiles the modules
listed in `rvguard._compiled.COMPILED` with mypyc: pyproject.toml's ``[build-system]`` brings mypy,
and the packages whose types mypy reads through those modules (pydantic, numpy), into the build
environment. It needs a C compiler that can build against ``Python.h``; the build tries one first
(a one-line C file), and without one it builds pure Python, saying why on stderr (``pip install
-v`` shows it) and in the package (``rvguard --version``: ``pure Python (not compiled at install:
…)``). The same fallback catches mypyc refusing the sources and the C compile failing.

``RVGUARD_COMPILE`` chooses: unset or ``1``, compile when possible (the default); ``0``, pure
Python; ``strict``, compile or fail the build (``make compiled`` builds that way). Editable
installs (``pip install -e``, as ``make test`` uses) never compile: they must keep running the
``.py`` sources the developer edits.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
MODE = os.environ.get("RVGUARD_COMPILE", "1")
EDITABLE = {"editable_wheel", "develop"} & set(sys.argv)
#: the commands that build the package's files (the metadata hooks run none of them: no mypyc there)
BUILDS = {"bdist_wheel", "build", "build_ext", "install", "bdist"} & set(sys.argv)
#: why this build is pure Python (empty: compiled, or not a build of the package's files)
WHY_PURE: list[str] = []


def _compiled_module() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "rvguard_compiled"}
    exec((HERE / "rvguard" / "_compiled.py").read_text(encoding="utf-8"), namespace)  # stdlib only
    return namespace


#: the modules mypyc compiles, and the file that says why a non-editable build is pure Python
COMPILED, NOTE = (lambda m: (list(m["COMPILED"]), str(m["NOTE"])))(_compiled_module())


def _say(message: str) -> None:
    print(f"rvguard build: {message}", file=sys.stderr, flush=True)


def _fallback(reason: str) -> list[Any]:
    if MODE == "strict":
        raise SystemExit(f"rvguard build: RVGUARD_COMPILE=strict and {reason}")
    _say(f"{reason}; building pure Python")
    WHY_PURE[:] = [reason]
    return []


def _compiler_problem() -> str | None:
    """Why no C extension can be built here (no compiler, or no ``Python.h``), else ``None``."""
    from distutils.ccompiler import new_compiler  # setuptools' copy: the one build_ext uses
    from distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.c"
        probe.write_text("#include <Python.h>\nint rvguard_probe(void) { return 0; }\n")
        try:
            compiler.compile([str(probe)], output_dir=tmp, include_dirs=[sysconfig.get_paths()["include"]])
        except Exception:  # noqa: BLE001 - CompileError, or the compiler is not there at all
            cc = compiler.compiler_so[0]
            why = "not found" if shutil.which(cc) is None else "cannot compile a file that includes Python.h"
            return f"no working C compiler ({cc}: {why})"
    return None


def ext_modules() -> list[Any]:
    """mypyc's extension modules when this build compiles and can, else none."""
    if MODE not in ("0", "1", "strict"):
        raise SystemExit(f"rvguard build: RVGUARD_COMPILE={MODE!r}: expected 0, 1 or strict")
    if EDITABLE:
        if MODE != "0":
            _say("an editable install runs the .py sources: not compiling")
        return []
    if not BUILDS:
        return []
    if MODE == "0":
        _say("RVGUARD_COMPILE=0: building pure Python")
        WHY_PURE[:] = ["RVGUARD_COMPILE=0"]
        return []
    if importlib.util.find_spec("mypyc") is None:  # mypyc itself runs in `_mypycify`'s child
        return _fallback("mypyc (from mypy) is not importable in the build environment")
    problem = _compiler_problem()
    if problem is not None:
        return _fallback(problem)
    try:  # missing imports: optional extras' modules, none of them compiled
        return _mypycify(["--ignore-missing-imports", *COMPILED])
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - mypyc's refusal, reported and survived
        return _fallback(f"mypyc refused the sources ({exc})")


#: run by `_mypycify` in a process of its own: mypyc's extensions, pickled to argv[1]; then it leaves
#: at once, without tearing mypy's state down
_MYPYCIFY = """
import os, pickle, sys
from mypyc.build import mypycify
# multi_file: one C file a module, which `_BuildExt` compiles side by side (one big file took 37 s
# of one core's -O3 here)
extensions = mypycify(sys.argv[2:], opt_level="3", multi_file=True)
with open(sys.argv[1], "wb") as out:
    pickle.dump(extensions, out)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def _mypycify(args: list[str]) -> list[Any]:
    """mypyc's extension modules (its C files written under ``build/``), made in a child process.

    Why a child: freeing mypy's state at the end of the process took 7 s of a 60 s build here
    (`make test` waits on the build), after the work was done; the child leaves with ``os._exit``
    once its result is written, and any failure of mypyc's is still its exit status."""
    import pickle

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "extensions.pickle"
        done = subprocess.run([sys.executable, "-c", _MYPYCIFY, str(out), *args], check=False)
        if done.returncode != 0:
            raise SystemExit(f"mypyc exited with status {done.returncode} (its output is above)")
        with out.open("rb") as f:
            return list(pickle.load(f))


class _BuildPy(build_py):
    """Also writes `NOTE` into a pure build: `rvguard._compiled.build` reads it."""

    def run(self) -> None:
        super().run()
        note = Path(self.build_lib) / "rvguard" / NOTE
        note.unlink(missing_ok=True)  # left by an earlier build in the same build directory
        if WHY_PURE and not self.editable_mode:
            _write_note(Path(self.build_lib), WHY_PURE[0])


def _write_note(build_lib: Path, reason: str) -> None:
    (build_lib / "rvguard").mkdir(parents=True, exist_ok=True)
    (build_lib / "rvguard" / NOTE).write_text(reason + "\n", encoding="utf-8")


class _BuildExt(build_ext):
    """Compile, or fall back to pure Python when the C compiler fails (not with ``strict``); an
    extension's C files side by side, one compiler process a CPU."""

    def build_extension(self, ext: Any) -> None:
        compile_one = self.compiler.compile

        def compile_all(sources: list[str], *args: Any, **kw: Any) -> list[str]:
            if len(sources) < 2:
                return list(compile_one(sources, *args, **kw))
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                parts = list(pool.map(lambda source: compile_one([source], *args, **kw), sources))
            return [obj for part in parts for obj in part]

        self.compiler.compile = compile_all
        try:
            super().build_extension(ext)
        finally:
            del self.compiler.compile  # the class's method again

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # the C compiler failed: pure Python still works
            if MODE == "strict":
                raise
            reason = f"compiling failed ({exc})"
            _say(f"{reason}; building pure Python")
            self.extensions = []
            self.distribution.ext_modules = []
            for built in Path(self.build_lib).rglob("*"):  # any extension built before the failure
                if built.name.endswith(tuple(EXTENSION_SUFFIXES)):
                    built.unlink()
            _write_note(Path(self.build_lib), reason)


setup(ext_modules=ext_modules(), cmdclass={"build_py": _BuildPy, "build_ext": _BuildExt})
