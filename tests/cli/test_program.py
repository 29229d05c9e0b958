"""The program: lazy imports, one exit-code mapping, ``--version``, experiments declared elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rvguard.cli import main, program
from rvguard.cli.registry import Entry

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "marquee.yaml")
COMMAND_MODULES = ("rvguard.cli.check", "rvguard.verify.cli", "rvguard.sim.cli", "rvguard.screen.cli")


def _loaded(argv: list[str]) -> dict[str, object]:
    """Run ``main(argv)`` in a fresh interpreter; its exit code and the modules it imported."""
    code = (
        "import json, sys\n"
        "from rvguard.cli import main\n"
        f"code = main({argv!r})\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    doc: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return doc


def test_help_lists_every_command_and_imports_none() -> None:
    doc = _loaded(["--help"])
    modules = doc["modules"]
    assert doc["code"] == 0 and isinstance(modules, list)
    assert not [m for m in COMMAND_MODULES if m in modules]
    assert not [m for m in ("pydantic", "z3", "numpy", "asyncio", "httpx") if m in modules]


def test_verify_loads_neither_the_simulator_nor_the_gateway() -> None:
    doc = _loaded(["verify", SPEC, "--json"])
    modules = doc["modules"]
    assert doc["code"] == 1 and isinstance(modules, list)  # the marquee fails one obligation
    assert "rvguard.verify.cli" in modules and "z3" in modules
    loaded = [m for m in modules if m.startswith(("rvguard.sim.", "rvguard.gateway.", "rvguard.screen."))]
    assert loaded == ["rvguard.gateway.commands", "rvguard.screen.commands", "rvguard.sim.commands"]
    assert not [m for m in ("numpy", "asyncio", "httpx", "uvicorn", "matplotlib") if m in modules]


def test_an_unknown_command_exits_2_and_imports_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _loaded(["verfy", SPEC])
    assert doc["code"] == 2 and not [m for m in COMMAND_MODULES if m in doc["modules"]]  # type: ignore[operator]
    assert main(["verfy"]) == 2
    assert "invalid choice: 'verfy'" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rvguard ") and len(out.split()) >= 2
    assert "(pure Python" in out or "(compiled (" in out  # which build runs


def test_a_bug_in_a_command_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {"boom": Entry("boom", "rvguard.no_such_module", "a command whose module is missing", "tests")}
    monkeypatch.setattr(program, "load_table", lambda: table)
    with pytest.raises(ModuleNotFoundError, match=r"rvguard\.no_such_module"):
        main(["boom"])


def test_experiment_routes_a_declared_experiment_to_its_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = program.load_table()
    name, argv = program._route(["experiment", "screen-eval", "--reps", "1"], table)
    assert (name, argv) == ("screen-eval", ["screen-eval", "--reps", "1"])
    assert program._route(["experiment", "beta-sweep"], table) == ("experiment", ["experiment", "beta-sweep"])
    assert main(["experiment", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps the epilog anywhere
    assert "rvguard experiment screen-eval ..." in help_text
    assert "rvguard experiment reproduce ..." in help_text


def test_the_full_parser_knows_every_command() -> None:
    parser = program.build_parser()
    args = parser.parse_args(["check", "t.jsonl", "--contract", SPEC])
    assert args.command == "check" and callable(args.run)


def _plugins_scanned(env_value: str | None) -> bool:
    """Run ``rvguard verify`` in a fresh interpreter: did pydantic scan the packages for plugins?"""
    code = (
        "import sys\n"
        "from rvguard.cli import main\n"
        f"main(['verify', {SPEC!r}, '--json'])\n"
        "from pydantic.plugin import _loader\n"
        "print(_loader._plugins is not None)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != program.PYDANTIC_PLUGINS}
    if env_value is not None:
        env[program.PYDANTIC_PLUGINS] = env_value
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return out.stdout.strip().splitlines()[-1] == "True"


def test_the_program_turns_pydantic_plugins_off_unless_told() -> None:
    assert not _plugins_scanned(None)  # rvguard needs no plugin: the scan's cost is skipped
    assert _plugins_scanned("")  # an operator's explicit setting is kept: empty loads them


def test_importing_the_contract_builds_no_validator() -> None:
    code = (
        "from rvguard.contract import Contract, Tenant\n"
        "print(Contract.__pydantic_complete__, Tenant.__pydantic_complete__)\n"
        "from rvguard.contract import load_contract\n"
        f"load_contract({SPEC!r})\n"
        "print(Contract.__pydantic_complete__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]  # built on first use, not at import
