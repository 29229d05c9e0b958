"""The optional compiled build (issue 16): pure and compiled runs give the same events and verdicts.

The fixture builds the compiled variant the way a user would (``RVGUARD_COMPILE=strict pip install
--no-build-isolation --target build/compiled``, from a copy of the sources, so the checkout's own
``build/`` holds no stale files) and reuses it while the sources are unchanged (a stamp of their
hash). It takes 2–4 minutes of CPU the first time. Without a C compiler or mypyc it skips, saying
which: pure Python is then what runs, and every other test covers it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
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
    import mypy.version

    return f"{digest.hexdigest()} mypy {mypy.version.__version__}"


def _run(argv: list[str], *, pure: bool, cwd: Path = TREE, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``argv`` with the compiled tree first on the path (the working directory too: ``-c`` puts it
    first), pure or not."""
    env = {k: v for k, v in os.environ.items() if k not in ("RVGUARD_PURE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(TREE)
    if pure:
        env["RVGUARD_PURE"] = "1"
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=cwd, **kw)


@pytest.fixture(scope="module")
def compiled_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc!r} not found): the compiled build cannot be made here")
    pytest.importorskip("mypyc", reason="mypyc (from mypy) is not installed: no compiled build")
    stamp = _stamp()
    if (TREE / ".stamp").is_file() and (TREE / ".stamp").read_text() == stamp:
        return TREE
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, src / name)
    shutil.rmtree(TREE, ignore_errors=True)
    argv = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps"]
    env = {**os.environ, "RVGUARD_COMPILE": "strict"}
    env.pop("RVGUARD_PURE", None)
    done = subprocess.run(
        [*argv, "--target", str(TREE), str(src)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=src,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (TREE / ".stamp").write_text(stamp)
    return TREE


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


def test_an_editable_install_is_never_compiled() -> None:
    """``pip install -e`` must keep running the sources the developer edits, whatever the environment."""
    code = (
        "import runpy, sys, setuptools; seen = {};"
        "setuptools.setup = lambda **kw: seen.update(kw);"
        "sys.argv = ['setup.py', sys.argv[1]]; runpy.run_path('setup.py');"
        "print(len(seen['ext_modules']))"
    )
    env = {**os.environ, "RVGUARD_COMPILE": "1"}
    for command in ("editable_wheel", "develop"):
        done = subprocess.run(
            [sys.executable, "-c", code, command],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=ROOT,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "0"), done.stderr
        assert "editable install runs the .py sources" in done.stderr


#: setup.py's extension list with mypyc made unimportable, under the ``RVGUARD_COMPILE`` given
_NO_MYPYC = (
    "import runpy, sys, setuptools; seen = {}; sys.modules['mypyc'] = None;"
    "setuptools.setup = lambda **kw: seen.update(kw);"
    "sys.argv = ['setup.py', 'bdist_wheel']; runpy.run_path('setup.py');"
    "print(len(seen['ext_modules']))"
)


def test_without_mypyc_the_build_falls_back_to_pure_python_saying_so() -> None:
    """No mypyc (no mypy in the build environment): pure Python and the reason; ``strict`` refuses."""
    asked = subprocess.run(
        [sys.executable, "-c", _NO_MYPYC],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "RVGUARD_COMPILE": "1"},
        cwd=ROOT,
    )
    assert (asked.returncode, asked.stdout.strip()) == (0, "0"), asked.stderr
    assert "mypyc (from mypy) is not importable" in asked.stderr and "building pure Python" in asked.stderr
    strict = subprocess.run(
        [sys.executable, "-c", _NO_MYPYC],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "RVGUARD_COMPILE": "strict"},
        cwd=ROOT,
    )
    assert strict.returncode != 0 and "RVGUARD_COMPILE=strict" in strict.stderr
