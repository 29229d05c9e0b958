"""`make test`'s two pytest phases agree with the suite's own lists in tests/conftest.py."""

from __future__ import annotations

from tests.conftest import ENGINE_DIRS, ROOT, SLOW_FIRST

MAKEFILE = (ROOT / "Makefile").read_text()


def _recipe(target: str) -> str:
    """The recipe lines of ``target`` in the Makefile."""
    lines = MAKEFILE.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        body.append(line)
    return "\n".join(body)


def test_the_engine_phase_collects_the_engine_dirs() -> None:
    line = next(line for line in MAKEFILE.splitlines() if line.startswith("ENGINE_DIRS :="))
    assert tuple(line.split(":=", 1)[1].split()) == ENGINE_DIRS
    assert "$(ENGINE_DIRS)" in _recipe("unit-engine") and "engine and not benchmark" in _recipe("unit-engine")


def test_the_fast_phase_keeps_the_slow_files_first() -> None:
    """xdist would otherwise reorder the files by their number of tests, a long file with few last."""
    fast = _recipe("unit-fast")
    assert "--dist loadfile" in fast and "--no-loadscope-reorder" in fast and "not engine" in fast


def test_every_slow_first_file_exists() -> None:
    """A renamed or removed file must leave the list, or its new name would lose its place silently."""
    assert [name for name in SLOW_FIRST if not (ROOT / name).is_file()] == []
    assert len(set(SLOW_FIRST)) == len(SLOW_FIRST)
