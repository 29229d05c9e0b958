"""Build the compiled tree a checkout runs (``make compiled``; `rvguard._compiled.use_tree`).

Builds the default wheel the way a user's ``pip install .`` does (``pip wheel``, build isolation
on, no ``RVGUARD_COMPILE``: pyproject.toml's ``[build-system]`` brings mypyc), from a copy of the
sources so that the checkout's own ``build/`` holds no stale files, and unpacks it into
``build/compiled`` (the wheel stays in ``build/compiled-wheel``, where tests/test_compiled.py
inspects it). A stamp of the sources' hash makes a second run with unchanged sources a no-op.
Without a C compiler the wheel is pure Python (``setup.py`` says why) and so is the tree; the
checkout then runs pure, and ``rvguard --version`` says why.

Usage: ``python scripts/compiled_tree.py`` (prints where the tree is and how long it took).
Stdlib only: it runs before anything is installed beside it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "compiled"
WHEELS = ROOT / "build" / "compiled-wheel"
SOURCES = ("rvguard", "setup.py", "pyproject.toml", "README.md", "LICENSE", "NOTICE", "MANIFEST.in")


def stamp() -> str:
    """A hash of everything the wheel is built from (the package's sources and the build files)."""
    digest = hashlib.sha256()
    files = [ROOT / "setup.py", ROOT / "pyproject.toml", *sorted((ROOT / "rvguard").rglob("*.py"))]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def fresh() -> bool:
    """Whether `TREE` and its wheel were built from the sources as they are now."""
    mark = TREE / ".stamp"
    return mark.is_file() and mark.read_text() == stamp() and any(WHEELS.glob("rvguard-*.whl"))


def default_wheel(out: Path) -> Path:
    """``pip wheel`` of a copy of the sources into ``out``, as a user's ``pip install .`` builds it."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in SOURCES:
            path = ROOT / name
            if path.is_dir():
                shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(path, src / name)
        unset = ("RVGUARD_PURE", "RVGUARD_COMPILE", "RVGUARD_COMPILED_TREE")
        env = {k: v for k, v in os.environ.items() if k not in unset}
        argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), str(src)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=src)
    if done.returncode != 0:
        raise SystemExit(f"compiled tree: pip wheel failed ({done.returncode}):\n{done.stderr[-3000:]}")
    [wheel] = out.glob("rvguard-*.whl")
    return wheel


def build() -> Path:
    """`TREE`, built (or kept, when `fresh`)."""
    if fresh():
        return TREE
    sources = stamp()
    shutil.rmtree(WHEELS, ignore_errors=True)
    wheel = default_wheel(WHEELS)
    new, old = TREE.with_name("compiled.new"), TREE.with_name("compiled.old")
    shutil.rmtree(new, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(new)
    (new / ".stamp").write_text(sources)
    shutil.rmtree(old, ignore_errors=True)
    if TREE.exists():  # swapped, not emptied: a process running from the old tree keeps its files
        TREE.rename(old)
    new.rename(TREE)
    shutil.rmtree(old, ignore_errors=True)
    return TREE


def main() -> None:
    began = time.monotonic()
    print(f"compiled tree: building the default wheel into {TREE} (a few minutes the first time)")
    kept = fresh()
    build()
    how = "unchanged sources, kept" if kept else f"built in {time.monotonic() - began:.0f} s"
    print(f"compiled tree: {TREE} ({how})")
    note = TREE / "rvguard" / "_pure_build.txt"  # setup.py's reason, when the build fell back
    if note.is_file():
        print(f"compiled tree: pure Python, not compiled: {note.read_text().strip()}", file=sys.stderr)


if __name__ == "__main__":
    main()
