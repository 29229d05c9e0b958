"""Every examples/x.py with a golden examples/x.out prints exactly that."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GOLDEN = sorted(p for p in EXAMPLES.glob("*.py") if p.with_suffix(".out").exists())


def test_there_are_golden_examples() -> None:
    assert any(p.name == "custom_property.py" for p in GOLDEN)


@pytest.mark.parametrize("script", GOLDEN, ids=lambda p: p.name)
def test_example_output_matches_golden(script: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout == script.with_suffix(".out").read_text()
