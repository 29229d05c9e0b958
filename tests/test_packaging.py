"""Packaging: the sdist holds the source tree and runs its tests; its wheel runs the README's commands.

The wheel test builds the sdist, the wheel from that sdist, installs the wheel (with the ``smt``
and ``sim`` extras, from the pip cache and the registries) into a fresh virtual environment
without pip of its own, and runs the README's "installed" lines from a directory outside the
checkout. About half a minute of CPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

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


def test_the_wheel_runs_the_readme_commands(sdist: Path, tmp_path: Path) -> None:
    wheels, venv, elsewhere = tmp_path / "wheels", tmp_path / "venv", tmp_path / "elsewhere"
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(sdist),
        ]
    )
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("rvguard-*.whl")
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", f"{wheel}[smt,sim]"]
    )
    assert installed.returncode == 0, installed.stderr
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    origin = _run([str(python), "-c", "import rvguard; print(rvguard.__file__)"], cwd=elsewhere, env=env)
    assert origin.stdout.strip().startswith(str(venv)), origin
    lines = _readme_lines()
    assert len(lines) >= 6 and all(c.startswith("rvguard ") for c, _ in lines)
    for command, expected in lines:
        done = _run(["/bin/sh", "-c", command], cwd=elsewhere, env=env)
        assert done.returncode == expected, (command, done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (command, done.stderr)
