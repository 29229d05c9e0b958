"""The compiled build (issues 16, 30): the default wheel compiles, and pure and compiled runs agree.

The fixture takes the default wheel and its tree from scripts/compiled_tree.py (``make compiled``),
which builds the wheel the way a user's ``pip install .`` does (``pip wheel``, build isolation on:
pyproject.toml's ``[build-system]`` brings mypyc), unpacks it into ``build/compiled`` and keeps
both while the sources are unchanged; run without make, the fixture builds them (about two
minutes: mypyc, then the C compiler). ``make test`` runs the whole suite on that tree
(``RVGUARD_COMPILED_TREE``) and the compiled modules' own tests again pure, here; a session run
pure (plain ``pytest``) runs them again compiled. Without a C compiler the tests that need the
compiled build skip, saying so: pure Python is then what runs, and every other test covers it; the
fallback's own wheel is tested by tests/test_packaging.py.
"""

from __future__ import annotations

import importlib.util
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

from rvguard._compiled import TREE_VARIABLE, compiled_modules

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "compiled"
#: existing tests of the compiled modules, run again on the compiled build
RERUN = (
    "tests/test_events.py",
    "tests/enforce/test_request.py",
    "tests/enforce/test_learners.py",
    "tests/test_lifecycle.py",
    "tests/enforce/test_transitions.py",
    "tests/enforce/test_core.py",
    "tests/enforce/test_guard.py",
    "tests/enforce/test_guard_ends.py",
    "tests/enforce/test_guard_stream.py",
    "tests/enforce/test_demotion.py",
    "tests/enforce/test_watch.py",
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


def _run(argv: list[str], *, pure: bool, cwd: Path = TREE, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``argv`` with the compiled tree first on the path (the working directory too: ``-c`` puts it
    first), pure or not."""
    env = {k: v for k, v in os.environ.items() if k not in ("RVGUARD_PURE", "PYTHONPATH", TREE_VARIABLE)}
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


def _tree_script() -> Any:
    """scripts/compiled_tree.py, the one builder of the compiled tree (``make compiled`` runs it)."""
    spec = importlib.util.spec_from_file_location("compiled_tree", ROOT / "scripts" / "compiled_tree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compiled_wheel() -> Path:
    """The default wheel and `TREE`, as ``make compiled`` left them (built here when stale)."""
    missing = _compiler_missing()
    if missing is not None:
        pytest.skip(missing)
    script = _tree_script()
    script.build()
    [wheel] = script.WHEELS.glob("rvguard-*.whl")
    return Path(wheel)


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
        "import rvguard.enforce.core, rvguard.enforce.guard, rvguard.monitors.monitor;"
        "import rvguard.sim.engine, rvguard.enforce.demotion;"
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
    assert a["guard"] == b["guard"]
    kinds = {e["kind"] for case in a["guard"].values() for e in case}
    assert {"admit", "reject", "complete", "fail"} <= kinds, kinds  # the seeded Guard took every way out
    assert sum(len(c["perturbed"]["violations"]) for c in a["sim"].values()) > 0  # the verdicts are not empty


def test_the_compiled_modules_pass_their_own_tests_on_the_other_build(compiled_tree: Path) -> None:
    """The existing tests of the compiled modules on the build this session does not run: pure
    when it runs the compiled tree (``make test``), else compiled (imported before pytest puts the
    checkout first on ``sys.path``)."""
    if os.environ.get(TREE_VARIABLE):
        assert compiled_modules(), "make test's session is meant to run compiled"
        env = {k: v for k, v in os.environ.items() if k != TREE_VARIABLE} | {"RVGUARD_PURE": "1"}
        argv = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts="]
        for tests in ([*RERUN], ["-m", "pure_build", *_pure_build_files()]):
            done = subprocess.run(
                [*argv, *tests], capture_output=True, text=True, check=False, env=env, cwd=ROOT, timeout=1200
            )
            assert "passed" in done.stdout and done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        return
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


def _pure_build_files() -> list[str]:
    """The test files that mark tests ``pure_build`` (tests/conftest.py skips them in a compiled session)."""
    mark = "pytest.mark.pure_build"
    files = sorted(p for p in (ROOT / "tests").rglob("test_*.py") if mark in p.read_text(encoding="utf-8"))
    assert files, "no test is marked pure_build: drop this run, or the marker"
    return [str(p.relative_to(ROOT)) for p in files]


def _checkout_with_tree(tmp_path: Path, tree: Path) -> tuple[Path, Path]:
    """A copy of the package and of ``tree`` in ``tmp_path`` (to edit one without touching the real ones)."""
    shutil.copytree(
        ROOT / "rvguard", tmp_path / "src" / "rvguard", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "src")  # a checkout: only a checkout uses a tree
    shutil.copytree(tree, tmp_path / "tree", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "src", tmp_path / "tree"


def _run_checkout(src: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    """``rvguard --version`` and the core's file, from the checkout ``src`` with ``tree`` named."""
    probe = "import rvguard.enforce.core as c, rvguard._compiled as k; print(k.build(), c.__file__)"
    env = {k: v for k, v in os.environ.items() if k not in ("RVGUARD_PURE", "PYTHONPATH")}
    env |= {TREE_VARIABLE: str(tree), "PYTHONPATH": str(src)}
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, env=env, cwd=src
    )


def test_a_checkout_runs_its_tree_and_refuses_a_stale_one(compiled_tree: Path, tmp_path: Path) -> None:
    """``RVGUARD_COMPILED_TREE``: the listed modules from the tree, the rest from the checkout; a
    source edited since the build is an ImportError naming it, never the old code run silently."""
    src, tree = _checkout_with_tree(tmp_path, compiled_tree)
    ran = _run_checkout(src, tree)
    assert ran.returncode == 0, ran.stderr
    words = ran.stdout.split()
    assert " ".join(words[:-1]) == f"compiled ({len(_listed())} modules)", ran.stdout
    assert Path(words[-1]).parent == tree / "rvguard" / "enforce"
    assert words[-1].endswith(EXTENSION_SUFFIXES[0])
    core = src / "rvguard" / "enforce" / "core.py"
    core.write_text(core.read_text() + "\n# edited after the build\n")
    stale = _run_checkout(src, tree)
    assert stale.returncode != 0 and "ImportError" in stale.stderr
    assert "built from other sources (rvguard/enforce/core.py)" in stale.stderr
    missing = _run_checkout(src, tmp_path / "nowhere")
    assert missing.returncode != 0 and "no compiled tree there" in missing.stderr


def test_a_pure_tree_runs_the_checkout_pure_and_says_why(compiled_tree: Path, tmp_path: Path) -> None:
    """A tree built where no C compiler worked holds no extension: the checkout runs pure, and
    ``build()`` gives the tree's reason."""
    src, tree = _checkout_with_tree(tmp_path, compiled_tree)
    for ext in tree.rglob("*" + EXTENSION_SUFFIXES[0]):
        ext.unlink()
    (tree / "rvguard" / "_pure_build.txt").write_text("no working C compiler (cc: not found)\n")
    ran = _run_checkout(src, tree)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(
        "pure Python (not compiled at install: no working C compiler (cc: not found))"
    )
    assert ran.stdout.split()[-1] == str(src / "rvguard" / "enforce" / "core.py")


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


@pytest.mark.pure_build  # build() in this process: a compiled session has loaded the tree
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
