"""The README's "Your own property" lines, run as written from an empty directory: the table written
with a here-document, proved, broken without it, enforced with it, each command's exit code the one
its ``# exit N`` comment states. ``rvguard`` is this tree's (a shim on PATH), not an installed one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- own-property:.*?-->\s*```sh\n(.*?)```", re.S)
EXIT = re.compile(r"#\s*exit (\d+)")


def _script(block: str) -> str:
    """The block with each ``rvguard`` line's exit code checked (``# exit N``; else 0)."""
    out = ["set -u"]
    for n, line in enumerate(block.splitlines(), 1):
        if not line.startswith("rvguard "):
            out.append(line)
            continue
        want = EXIT.search(line)
        code = want.group(1) if want else "0"
        out.append(
            f'{line}\nrc=$?; [ "$rc" -eq {code} ] || {{ echo "line {n}: $rc, not {code}" >&2; exit 90; }}'
        )
    return "\n".join(out) + "\n"


def test_the_readme_own_property_lines_run_as_written(tmp_path: Path) -> None:
    (block,) = BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "cat > my_table.yaml" in block and "--property my_table.yaml" in block
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "rvguard").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rvguard.cli "$@"\n')
    (shim / "rvguard").chmod(0o755)
    work = tmp_path / "scratch"
    work.mkdir()
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["bash", "-c", _script(block)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TENANT_CONCURRENCY: VIOLATED" in done.stdout and "TENANT_CONCURRENCY: holds" in done.stdout
    assert sorted(p.name for p in work.iterdir()) == [
        "contract.yaml",
        "free.jsonl",
        "kept.jsonl",
        "keys.yaml",
        "my_table.yaml",
    ]
