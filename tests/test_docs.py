"""The user docs: the site builds strictly, every Python block runs as written (or says it is a
fragment), and no internal word (issue numbers, session notes, the team's design sections) leaks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FRAGMENT = "<!-- fragment -->"
BLOCK = re.compile(r"(<!-- fragment -->\s*)?```python\n(.*?)```", re.S)
#: words that mean something only inside the team
INTERNAL = re.compile(r"\b([Ii]ssue \d+|[Ss]top \d+)|DESIGN §|DESIGN\.md")


def _blocks() -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in BLOCK.finditer(text):
            if not m.group(1):
                out.append((page.name, text[: m.start()].count("\n") + 1, m.group(2)))
    return out


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()


@pytest.mark.parametrize(("page", "line", "code"), _blocks(), ids=lambda v: str(v)[:40])
def test_every_python_block_runs_as_written(page: str, line: int, code: str, tmp_path: Path) -> None:
    for shared in ("specs", "examples"):  # the paths the docs name, from a directory of its own
        (tmp_path / shared).symlink_to(ROOT / shared)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{page}:{line}: {done.stderr[-3000:]}"


def test_the_readme_leads_with_the_four_uses_and_stays_short() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 320
    heads = re.findall(r"^### (\d)\. (.*)$", text, re.M)
    assert [n for n, _ in heads] == ["1", "2", "3", "4"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_internal_words_in_user_docs(page: Path) -> None:
    found = [m.group(0) for m in INTERNAL.finditer(page.read_text())]
    assert found == [], f"{page.name}: {found}"
