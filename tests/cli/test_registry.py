"""The command declarations: each package's own, import-free, each resolving to the plugin protocol."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from rvguard.cli.registry import PROVIDERS, Entry, load_table


def _path(provider: str) -> Path:
    spec = importlib.util.find_spec(provider)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_declaration_module_imports_nothing(provider: str) -> None:
    tree = ast.parse(_path(provider).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_every_command_resolves_to_the_plugin_protocol() -> None:
    table = load_table()
    assert {"check", "verify", "screen", "screen-eval", "simulate", "experiment", "demo"} <= set(table)
    for entry in table.values():
        command = entry.load()
        assert callable(command.add_arguments) and callable(command.run), entry.name
        assert entry.help and entry.target.startswith(entry.provider.rsplit(".", 1)[0]), entry


def test_screen_eval_is_declared_by_the_screen_and_is_an_experiment() -> None:
    entry = load_table()["screen-eval"]
    assert entry.provider == "rvguard.screen.commands" and entry.experiment
    experiments = {e.name: e.provider for e in load_table().values() if e.experiment}
    assert experiments == {
        "screen-eval": "rvguard.screen.commands",
        "reproduce": "rvguard.study.commands",
        "redline-alpha": "rvguard.sim.commands",
        "relief-livelock": "rvguard.sim.commands",
        "relief-eviction": "rvguard.sim.commands",
    }


def test_a_name_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="'check' declared by both"):
        load_table(("rvguard.cli.commands", "rvguard.cli.commands"))


def test_a_missing_module_is_not_swallowed() -> None:
    with pytest.raises(ModuleNotFoundError, match=r"rvguard\.no_such_module"):
        Entry("x", "rvguard.no_such_module", "help", "tests").load()


def test_a_target_without_the_protocol_names_the_missing_method() -> None:
    with pytest.raises(TypeError, match=r"rvguard.cli.registry:Entry has no add_arguments\(\)"):
        Entry("x", "rvguard.cli.registry:Entry", "help", "tests").load()
