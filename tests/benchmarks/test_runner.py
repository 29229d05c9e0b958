"""``python -m benchmarks`` names the build it measures, and measures that one (issue 30).

Typed at the repository's root, ``PYTHONPATH=build/compiled python -m benchmarks`` once printed
"pure Python": ``python -m`` puts the working directory (the checkout's sources) ahead of
``PYTHONPATH``. Here a copy of the package stands for another build: the first line must name it,
and a script run as the benchmarks are, and a ``python -m rvguard.cli`` it starts, must import it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import run

ROOT = Path(__file__).resolve().parents[2]

#: a stand-in benchmark: where its rvguard comes from, and where a ``-m`` child's comes from
PROBE = """
import subprocess, sys
import rvguard.enforce.core as core
print("script", core.__file__)
code = "import rvguard.enforce.core as c; print('child', c.__file__)"
subprocess.run([sys.executable, "-c", code], check=True)
"""


def _other_build(tmp: Path) -> Path:
    """A copy of the package in ``tmp/tree``: another rvguard, found only through ``PYTHONPATH``."""
    tree = tmp / "tree"
    shutil.copytree(ROOT / "rvguard", tree / "rvguard", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def test_the_first_line_names_the_build_on_a_relative_pythonpath_from_the_root(tmp_path: Path) -> None:
    tree = _other_build(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.path.relpath(tree, ROOT)}  # as typed at the root
    env.pop("RVGUARD_PURE", None)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--build"], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"rvguard build: pure Python, from {tree}", done.stdout


def test_a_script_and_its_children_import_the_build_the_first_line_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    tree = _other_build(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHONPATH", os.path.relpath(tree, ROOT))
    assert run([sys.executable, str(probe)]) == 0
    out = capfd.readouterr().out.split()
    where = str(tree / "rvguard" / "enforce" / "core.py")
    assert out == ["script", where, "child", where]


def _reusing_tests() -> list[str]:
    """The benchmark scripts that import the checkout's test helpers."""
    scripts = sorted((ROOT / "benchmarks").glob("bench_*.py"))
    return [p.name for p in scripts if "from tests." in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize("script", _reusing_tests())
def test_a_script_that_reuses_the_tests_helpers_imports_them_as_the_runner_runs_it(script: str) -> None:
    """Run from ``benchmarks/`` with the checkout last on the path, ``import tests`` found the
    ``tests`` package ciw installs into site-packages: bench_gateway and bench_fleet failed to start
    under ``make bench`` ("No module named 'tests.gateway'")."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT / "benchmarks",
        env=os.environ | {"PYTHONPATH": ""},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
