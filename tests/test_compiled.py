"""The compiled build (issues 16, 30): the default wheel compiles, and pure and compiled runs agree.

The fixture builds the wheel the way a user's ``pip install .`` does (``pip wheel``, build isolation
on, no ``RVGUARD_COMPILE``: pyproject.toml's ``[build-system]`` brings mypyc), from a copy of the
sources so that the checkout's own ``build/`` holds no stale files, checks that it holds an
extension module for every listed module, and unpacks it into ``build/compiled``, which the tests
after it run. It reuses that tree while the sources are unchanged (a stamp of their hash). The
build takes about two minutes the first time (mypyc, then the C compiler: 102 s on 2 shared cores).
Without a C compiler it skips, saying so: pure Python is then what runs, and every other test
covers it; the fallback's own wheel is tested by tests/test_packaging.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "compiled"
SOURCES = ("rvguard", "setup.py", "pyproject.toml", "README.md", "LICENSE", "NOTICE", "MANIFEST.in")
#: existing tests of the compiled modules, run again on the compiled build
RERUN = (
    "tests/test_events.py",
    "tests/enforce/test_request.py",
    "tests/enforce/test_learners.py",
    "tests/test_lifecycle.py",
    "tests/enforce/test_transitions.py",
    "tests/enforce/test_core.py",
    "tests/enforce/test_demotion.py",
    "tests/enforce/test_ready.py",
    "tests/monitors/test_product.py",
    "tests/monitors/test_monitor.py",
    "tests/sim/test_engine.py",
)


def _listed() -> list[str]:
    sys.path.insert(0, str(ROOT))
    try:
        from rvguard._compiled import COMPILED
    finally:
        sys.path.pop(0)
    return sorted(p.removesuffix(".py").replace("/", ".") for p in COMPILED)


def _stamp() -> str:
    digest = hashlib.sha256()
    files = [ROOT / "setup.py", ROOT / "pyproject.toml", *sorted((ROOT / "rvguard").rglob("*.py"))]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _run(argv: list[str], *, pure: bool, cwd: Path = TREE, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``argv`` with the compiled tree first on the path (the working directory too: ``-c`` puts it
    first), pure or not."""
    env = {k: v for k, v in os.environ.items() if k not in ("RVGUARD_PURE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(TREE)
    if pure:
        env["RVGUARD_PURE"] = "1"
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=cwd, **kw)


def _compiler_missing() -> str | None:
    """Why no C extension can be built here (as setup.py's probe would find), else ``None``."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    if shutil.which(cc.split()[0]) is None:
        return f"no C compiler ({cc!r} not found): the compiled build cannot be made here"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python.h (the Python development headers): the compiled build cannot be made here"
    return None


def _default_wheel(out: Path, tmp: Path) -> Path:
    """``pip wheel`` of a copy of the sources, as a user's ``pip install .`` builds it."""
    src = tmp / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy(path, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("RVGUARD_PURE", "RVGUARD_COMPILE")}
    argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), str(src)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=src)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [wheel] = out.glob("rvguard-*.whl")
    return wheel


@pytest.fixture(scope="module")
def compiled_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default wheel, built once while the sources are unchanged and unpacked into `TREE`."""
    missing = _compiler_missing()
    if missing is not None:
        pytest.skip(missing)
    stamp, wheels = _stamp(), ROOT / "build" / "compiled-wheel"
    if (TREE / ".stamp").is_file() and (TREE / ".stamp").read_text() == stamp:
        [wheel] = wheels.glob("rvguard-*.whl")
        return wheel
    shutil.rmtree(TREE, ignore_errors=True)
    shutil.rmtree(wheels, ignore_errors=True)
    wheel = _default_wheel(wheels, tmp_path_factory.mktemp("build"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(TREE)
    (TREE / ".stamp").write_text(stamp)
    return wheel


@pytest.fixture(scope="module")
def compiled_tree(compiled_wheel: Path) -> Path:
    return TREE


def test_the_default_wheel_holds_an_extension_for_every_listed_module(compiled_wheel: Path) -> None:
    with zipfile.ZipFile(compiled_wheel) as archive:
        names = set(archive.namelist())
    suffix = EXTENSION_SUFFIXES[0]  # .cpython-311-x86_64-linux-gnu.so here
    assert {name.replace(".", "/") + suffix for name in _listed()} - names == set()
    assert "rvguard/_pure_build.txt" not in names  # setup.py's note of a pure build (_compiled.NOTE)
    assert not compiled_wheel.name.endswith("-none-any.whl")  # tagged for this platform


def test_the_build_compiles_the_listed_modules_and_pure_mode_loads_none(compiled_tree: Path) -> None:
    probe = (
        "import rvguard.enforce.core, rvguard.monitors.monitor, rvguard.sim.engine, rvguard.enforce.demotion;"
        "from rvguard._compiled import compiled_modules; import rvguard.enforce.core as c;"
        "print(compiled_modules(), c.__file__.startswith(sys.argv[1]))"
    )
    argv = [sys.executable, "-c", "import sys;" + probe, str(compiled_tree)]
    compiled, pure = _run(argv, pure=False), _run(argv, pure=True)
    assert compiled.returncode == 0 and pure.returncode == 0, compiled.stderr + pure.stderr
    assert compiled.stdout.strip() == f"{_listed()} True"
    assert pure.stdout.strip() == "[] True"  # the same tree, its .py sources


def test_the_version_says_which_build_runs(compiled_tree: Path) -> None:
    argv = [sys.executable, "-m", "rvguard.cli", "--version"]
    compiled, pure = _run(argv, pure=False), _run(argv, pure=True)
    assert compiled.stdout.strip().endswith(f"(compiled ({len(_listed())} modules))"), compiled.stdout
    assert pure.stdout.strip().endswith("(pure Python (RVGUARD_PURE=1))"), pure.stdout


def test_pure_and_compiled_runs_give_the_same_traces_and_verdicts(compiled_tree: Path) -> None:
    argv = [sys.executable, str(ROOT / "tests" / "compiled_run.py")]
    compiled, pure = _run(argv, pure=False), _run(argv, pure=True)
    assert compiled.returncode == 0 and pure.returncode == 0, compiled.stderr[-2000:] + pure.stderr[-2000:]
    a, b = json.loads(pure.stdout), json.loads(compiled.stdout)
    assert a["compiled"] == [] and b["compiled"] == _listed()
    assert a["sim"].keys() == b["sim"].keys()
    for case in a["sim"]:
        assert a["sim"][case] == b["sim"][case], case
    assert a["redline"] == b["redline"]
    assert sum(len(c["perturbed"]["violations"]) for c in a["sim"].values()) > 0  # the verdicts are not empty


def test_the_compiled_modules_pass_their_own_tests(compiled_tree: Path) -> None:
    """The existing tests of the compiled modules, on the compiled build (imported before pytest
    puts the checkout first on ``sys.path``)."""
    prelude = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import rvguard.enforce.core, rvguard.monitors.monitor, rvguard.sim.engine;"
        "from rvguard._compiled import compiled_modules; assert compiled_modules(), 'not compiled';"
        "import pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', *sys.argv[2:]]))"
    )
    done = _run(
        [sys.executable, "-c", prelude, str(compiled_tree), *RERUN], pure=False, cwd=ROOT, timeout=1200
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


#: setup.py run as the command given (``sys.argv[1]``), printing how many extension modules it declares;
#: ``sys.argv[2] == "no-mypyc"`` makes mypyc unimportable
_SETUP_PY = (
    "import runpy, sys, setuptools; seen = {};"
    "sys.modules.update({'mypyc': None} if sys.argv[2] == 'no-mypyc' else {});"
    "setuptools.setup = lambda **kw: seen.update(kw);"
    "sys.argv = ['setup.py', sys.argv[1]]; runpy.run_path('setup.py');"
    "print(len(seen['ext_modules']))"
)


def _setup_py(command: str, *, mypyc: bool = True, **env: str) -> tuple[int, str, str]:
    """setup.py's exit code, declared extension count and stderr, as ``command`` under ``env``
    (``RVGUARD_COMPILE`` unset unless given)."""
    full = {k: v for k, v in os.environ.items() if k not in ("RVGUARD_COMPILE", "CC")} | env
    argv = [sys.executable, "-c", _SETUP_PY, command, "mypyc" if mypyc else "no-mypyc"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=full, cwd=ROOT)
    return done.returncode, done.stdout.strip(), done.stderr


@pytest.mark.parametrize("mode", [None, "1", "strict"])
@pytest.mark.parametrize("command", ["editable_wheel", "develop"])
def test_an_editable_install_is_never_compiled(command: str, mode: str | None) -> None:
    """``pip install -e`` must keep running the sources the developer edits, whatever the environment."""
    code, count, stderr = _setup_py(command, **({} if mode is None else {"RVGUARD_COMPILE": mode}))
    assert (code, count) == (0, "0"), stderr
    assert "editable install runs the .py sources" in stderr


@pytest.mark.parametrize("command", ["egg_info", "dist_info", "sdist"])
def test_the_metadata_hooks_and_the_sdist_run_no_mypyc(command: str) -> None:
    """pip runs setup.py for the requirements and the metadata before the wheel: mypyc only in the wheel."""
    code, count, stderr = _setup_py(command, mypyc=False)
    assert (code, count) == (0, "0"), stderr
    assert "rvguard build" not in stderr  # mypyc was not even looked for


def test_rvguard_compile_0_builds_pure_python_and_a_wrong_value_is_refused() -> None:
    code, count, stderr = _setup_py("bdist_wheel", RVGUARD_COMPILE="0")
    assert (code, count) == (0, "0") and "RVGUARD_COMPILE=0: building pure Python" in stderr
    code, count, stderr = _setup_py("bdist_wheel", RVGUARD_COMPILE="yes")
    assert code != 0 and "expected 0, 1 or strict" in stderr


def test_without_mypyc_the_build_falls_back_to_pure_python_saying_so() -> None:
    """No mypyc (no mypy in the build environment): pure Python and the reason; ``strict`` refuses."""
    code, count, stderr = _setup_py("bdist_wheel", mypyc=False)
    assert (code, count) == (0, "0"), stderr
    assert "mypyc (from mypy) is not importable" in stderr and "building pure Python" in stderr
    code, _, stderr = _setup_py("bdist_wheel", mypyc=False, RVGUARD_COMPILE="strict")
    assert code != 0 and "RVGUARD_COMPILE=strict" in stderr


@pytest.mark.parametrize(
    ("cc", "why"),
    [("/bin/false", "cannot compile a file that includes Python.h"), ("/nonexistent/cc", "not found")],
)
def test_without_a_c_compiler_the_build_falls_back_to_pure_python_saying_so(cc: str, why: str) -> None:
    """The default build tries the compiler on a one-line C file first: no mypyc pass to throw away
    (tests/test_packaging.py installs such a wheel; ``rvguard --version`` says it is pure, and why)."""
    code, count, stderr = _setup_py("bdist_wheel", CC=cc)
    assert (code, count) == (0, "0"), stderr
    assert f"no working C compiler ({cc}: {why}); building pure Python" in stderr
    code, _, stderr = _setup_py("bdist_wheel", CC=cc, RVGUARD_COMPILE="strict")
    assert code != 0 and "RVGUARD_COMPILE=strict and no working C compiler" in stderr


def test_the_build_says_why_a_pure_install_did_not_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setup.py leaves its reason beside `rvguard._compiled` in a pure wheel; a checkout has none."""
    from rvguard import _compiled

    assert _compiled.build() in ("pure Python", "pure Python (RVGUARD_PURE=1)")
    monkeypatch.setattr(_compiled, "__file__", str(tmp_path / "_compiled.py"))
    monkeypatch.setattr(
        sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, _compiled.PureFinder)]
    )
    (tmp_path / _compiled.NOTE).write_text("no working C compiler (cc: not found)\n")
    assert _compiled.build() == "pure Python (not compiled at install: no working C compiler (cc: not found))"
