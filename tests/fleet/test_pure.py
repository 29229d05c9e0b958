"""The fleet's decision modules stay pure: no I/O, no clock, no store client at module level."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FLEET = Path(__file__).resolve().parents[2] / "rvguard" / "fleet"
PURE = ["ledger.py", "router.py", "merge.py"]
FORBIDDEN = {"asyncio", "time", "socket", "subprocess", "redis", "httpx", "pydantic"}


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_io(name: str) -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse((FLEET / name).read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, imported & FORBIDDEN


def test_importing_rvguard_leaves_redis_out() -> None:
    import subprocess
    import sys

    code = "import sys, rvguard, rvguard.fleet.credits; print('redis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
