"""A command whose output needs an extra refuses at once when it is missing, before any work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import rvguard.screen.eval_cli
import rvguard.sim.cli
import rvguard.study.cli
from rvguard.cli import main


def _no_work(*_: object, **__: object) -> None:
    raise AssertionError("the command started its work before checking its extras")


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--reps", "1"],
        ["experiment", "beta-sweep", "--reps", "1"],
        ["screen-eval", "--grid", "small"],
    ],
)
def test_missing_matplotlib_is_refused_before_simulating(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    monkeypatch.setattr(rvguard.sim.cli, "run_experiment", _no_work)
    monkeypatch.setattr(rvguard.study.cli, "run_experiment", _no_work)
    monkeypatch.setattr(rvguard.sim.cli, "EXPERIMENTS", dict.fromkeys(rvguard.sim.cli.EXPERIMENTS, _no_work))
    monkeypatch.setattr(rvguard.screen.eval_cli, "evaluate", _no_work)
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "matplotlib is not installed: pip install 'rvguard[sim]'" in err and "Traceback" not in err


_BLOCK_STARLETTE = """
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition('.')[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Missing())
from rvguard.cli import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize(
    ("blocked", "argv", "extra"),
    [
        ({"starlette"}, ["serve", "specs/marquee.yaml", "--upstream", "http://127.0.0.1:9"], "gateway"),
        ({"z3"}, ["verify", "specs/marquee.yaml"], "smt"),
    ],
)
def test_a_command_whose_extra_is_missing_names_the_extra(
    blocked: set[str], argv: list[str], extra: str
) -> None:
    """Wherever the import fails (the command's module or deep in its run), exit 2, no traceback."""
    import subprocess

    code = _BLOCK_STARLETTE.format(blocked=blocked, argv=argv)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"pip install 'rvguard[{extra}]'" in out.stderr and "Traceback" not in out.stderr


def test_a_missing_module_that_is_no_extra_is_a_bug_and_keeps_its_traceback() -> None:
    import subprocess

    code = _BLOCK_STARLETTE.format(
        blocked={"rvguard_nonexistent_dep", "pydantic_core"},
        argv=["check", "-", "--contract", "specs/marquee.yaml"],
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "Traceback" in out.stderr
