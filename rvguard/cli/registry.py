"""Which commands exist and where their code is, known without importing that code.

Every package that brings commands declares them in its own ``commands.py``, a module that
imports nothing and holds ``COMMANDS``: a tuple of ``(name, target, help)`` triples, where
``target`` is ``"package.module"`` or ``"package.module:attribute"`` naming an object that
follows the plugin protocol (`Command`). A package whose commands also run as an
experiment (``rvguard experiment NAME``) lists their names in ``EXPERIMENTS``. The CLI reads
these declarations for ``rvguard --help`` and to route a command, and imports a command's
module only when that command runs (DESIGN §9: the CLI is the roof; no floor imports it).
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Protocol, cast

__all__ = ["PROVIDERS", "Command", "Entry", "load_table"]

#: the packages that declare commands, in the order ``rvguard --help`` lists them
PROVIDERS = (
    "rvguard.cli.commands",
    "rvguard.verify.commands",
    "rvguard.screen.commands",
    "rvguard.sim.commands",
    "rvguard.study.commands",
    "rvguard.gateway.commands",
)


class Command(Protocol):
    """The plugin protocol: what the CLI calls on a command's target.

    ``add_arguments`` adds the command's options to the parser the CLI made for it.
    ``run`` returns True when what the command checked holds (exit 0) and False when a
    property or obligation fails or the screen rejects (exit 1); bad input raises an
    `rvguard.errors.RvguardError` (exit 2). Commands never speak exit codes themselves.
    """

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's arguments."""

    def run(self, args: argparse.Namespace) -> bool:
        """Do the work; True when it holds."""


@dataclass(frozen=True)
class Entry:
    """One declared command: its name, where its code is, the line ``--help`` shows."""

    name: str
    target: str
    help: str
    provider: str
    experiment: bool = False

    def load(self) -> Command:
        """Import the command's module (only now) and return its target."""
        module_name, _, attribute = self.target.partition(":")
        module = importlib.import_module(module_name)
        target = getattr(module, attribute) if attribute else module
        for method in ("add_arguments", "run"):
            if not callable(getattr(target, method, None)):
                raise TypeError(f"command {self.name!r}: {self.target} has no {method}() (see Command)")
        return cast(Command, target)


def load_table(providers: tuple[str, ...] = PROVIDERS) -> dict[str, Entry]:
    """Every declared command by name, in the providers' order; a name declared twice is an error."""
    table: dict[str, Entry] = {}
    for provider in providers:
        module = importlib.import_module(provider)
        experiments = frozenset(getattr(module, "EXPERIMENTS", ()))
        for name, target, text in module.COMMANDS:
            if name in table:
                raise ValueError(f"command {name!r} declared by both {table[name].provider} and {provider}")
            table[name] = Entry(name, target, text, provider, experiment=name in experiments)
    return table
