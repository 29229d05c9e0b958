"""Modules renamed in this release: each old path warns once and is the new module itself.

Each case runs in a fresh interpreter, so the warning is seen on first import whatever the rest of
the suite imported before.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

RENAMED = [
    ("rvguard.enforce.dispatch", "rvguard.enforce.dispatchers", "VLLMDispatcher"),
    ("rvguard.gateway.metrics", "rvguard.gateway.prometheus", "MetricsSink"),
    ("rvguard.sim.arms", "rvguard.sim.runner", "run_arms"),
    ("rvguard.verify.check", "rvguard.verify.preconditions", "verify_contract"),
    ("rvguard.verify.credit", "rvguard.verify.af_induction", None),
    ("rvguard.screen.model", "rvguard.screen.queueing", None),
]


@pytest.mark.parametrize(("old", "new", "name"), RENAMED)
def test_the_old_path_warns_and_is_the_new_module(old: str, new: str, name: str | None) -> None:
    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "print([str(w.message) for w in seen if w.category is DeprecationWarning])\n"
        "print(old is new)\n"
        + (f"print(getattr(old, {name!r}) is getattr(new, {name!r}))\n" if name else "print(True)\n")
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    warned, same, same_name = out.stdout.strip().splitlines()
    assert f"{old} is deprecated: import {new}" in warned
    assert same == "True" and same_name == "True"
