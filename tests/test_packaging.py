"""Packaging: the sdist holds the source tree and runs its tests; its wheel runs the README's commands.

The wheel tests build the sdist, the wheel from that sdist *without a C compiler* (``CC=/bin/false``:
the fallback to pure Python, which the build finds at once; tests/test_compiled.py builds the
default, compiled wheel), install the wheel (with the ``smt`` and ``sim`` extras, from the pip
cache and the registries) into a fresh virtual environment without pip of its own, and run the
README's "installed" lines from a directory outside the checkout. About half a minute of CPU.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from rvguard import __version__

ROOT = Path(__file__).resolve().parents[1]
TREE = ("rvguard", "tests", "specs", "proofs", "examples", "benchmarks", "deploy", "docs", "scripts", ".ci")
TOP = ("README.md", "LICENSE", "NOTICE", "pyproject.toml", "setup.py", "Makefile", "MANIFEST.in")
INSTALLED = re.compile(r"<!-- installed:.*?-->\s*```sh\n(.*?)```", re.S)


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    code = "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])"
    done = _run([sys.executable, "-c", code, str(out)], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    [archive] = out.glob("rvguard-*.tar.gz")
    return archive


def _source_files() -> set[str]:
    files = {str(p.relative_to(ROOT)) for d in TREE for p in (ROOT / d).rglob("*") if p.is_file()}
    return {f for f in files if "__pycache__" not in f and ".egg-info" not in f} | set(TOP)


def test_the_sdist_holds_the_source_tree(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert _source_files() - names == set()
    assert {"rvguard/data/specs/marquee.yaml", "rvguard/data/traces/azure_code_slice.csv"} <= names


def test_the_sdist_runs_its_tests(sdist: Path, tmp_path: Path) -> None:
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    [tree] = tmp_path.glob("rvguard-*")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    where = _run([sys.executable, "-c", "import rvguard; print(rvguard.__file__)"], cwd=tree, env=env)
    assert where.stdout.strip().startswith(str(tree)), where  # the sdist's code, not this checkout's
    tests = ["tests/test_real_traces.py", "tests/test_contract.py", "tests/cli/test_registry.py"]
    done = _run([sys.executable, "-m", "pytest", "-x", *tests], cwd=tree, env=env)
    assert done.returncode == 0, done.stdout[-3000:]


def _readme_lines() -> list[tuple[str, int]]:
    """The README's installed commands (no pip line) and the exit code each expects."""
    [block] = INSTALLED.findall((ROOT / "README.md").read_text())
    out = []
    for line in block.splitlines():
        command, _, comment = line.partition("#")
        if command.strip() and not command.startswith("pip "):
            expected = re.search(r"exit (\d)", comment)
            out.append((command.strip(), int(expected.group(1)) if expected else 0))
    return out


@pytest.fixture(scope="module")
def installed(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv with the sdist's wheel, built where no C compiler works, and the environment
    that puts its ``bin`` first; the wheel is beside the venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheels, venv = tmp / "wheels", tmp / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("RVGUARD_COMPILE", "RVGUARD_PURE")}
    argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
    built = _run([*argv, "-w", str(wheels), str(sdist)], env={**env, "CC": "/bin/false"})
    assert built.returncode == 0, built.stderr
    assert "rvguard build: no working C compiler (/bin/false: " in built.stdout + built.stderr
    [wheel] = wheels.glob("rvguard-*.whl")
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", f"{wheel}[smt,sim]"]
    )
    assert installed.returncode == 0, installed.stderr
    env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv, env


def test_without_a_c_compiler_the_wheel_is_pure_and_says_why(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = installed
    [wheel] = (venv.parent / "wheels").glob("rvguard-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert [n for n in archive.namelist() if n.endswith(".so")] == []
    done = _run(["rvguard", "--version"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    why = "no working C compiler (/bin/false: cannot compile a file that includes Python.h)"
    assert done.stdout.strip() == f"rvguard {__version__} (pure Python (not compiled at install: {why}))"


def test_the_wheel_runs_the_readme_commands(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    venv, env = installed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    origin = _run(
        [str(venv / "bin" / "python"), "-c", "import rvguard; print(rvguard.__file__)"],
        cwd=elsewhere,
        env=env,
    )
    assert origin.stdout.strip().startswith(str(venv)), origin
    lines = _readme_lines()
    assert len(lines) >= 6 and all(c.startswith("rvguard ") for c, _ in lines)
    for command, expected in lines:
        done = _run(["/bin/sh", "-c", command], cwd=elsewhere, env=env)
        assert done.returncode == expected, (command, done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (command, done.stderr)


def _setup_part(*names: str) -> dict[str, Any]:
    """setup.py's imports and the named top-level definitions, without running its ``setup()``."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    keep = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        or (isinstance(node, ast.FunctionDef) and node.name in names)
        or (isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets))
    ]
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "setup.py", "exec"), namespace)
    return namespace


def test_mypyc_runs_in_a_child_whose_failure_the_build_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child that runs mypyc leaves with ``os._exit``: its extensions still come back, and a
    refusal still reaches the build as an error (which `ext_modules` turns into the pure fallback)."""
    mypycify = _setup_part("_MYPYCIFY", "_mypycify")["_mypycify"]
    monkeypatch.chdir(tmp_path)  # mypyc writes its C files under ./build
    (tmp_path / "fine.py").write_text("def twice(x: int) -> int:\n    return 2 * x\n")
    [extension] = mypycify(["fine.py"])
    assert extension.name == "fine" and (tmp_path / "build").is_dir()
    (tmp_path / "wrong.py").write_text('x: int = "not an int"\n')
    with pytest.raises(SystemExit, match="mypyc exited with status 1"):
        mypycify(["wrong.py"])
