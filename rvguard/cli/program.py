"""The ``rvguard`` program: read argv, build only the parser the command needs, run it, map the exit.

``rvguard --help`` reads the commands' declarations (`registry`) and imports no command's
code; ``rvguard NAME ...`` imports NAME's module alone. ``rvguard experiment NAME ...`` runs a
command that a package declared as an experiment (``screen-eval``) as ``rvguard NAME ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Collection, Sequence

from .. import progress
from ..errors import RvguardError
from .exits import EXIT_INPUT, exit_code, missing_extra, report_error
from .registry import Entry, load_table

__all__ = ["build_parser", "main"]

EXPERIMENT = "experiment"
#: pydantic looks for third-party plugins in every installed package's entry points before it
#: builds the first model: 6–15 ms of every command, for plugins rvguard never uses. The program
#: turns them off unless the variable is set (``PYDANTIC_DISABLE_PLUGINS=`` empty loads them).
PYDANTIC_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


class _Version(argparse.Action):
    """``--version``: the package's ``__version__`` (pyproject.toml reads the same attribute), and
    which build runs (compiled or pure Python, `rvguard._compiled.build`)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print rvguard's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from .. import __version__
        from .._compiled import build

        print(f"rvguard {__version__} ({build()})")
        parser.exit()


def build_parser(
    table: dict[str, Entry] | None = None, *, load: Collection[str] | None = None
) -> argparse.ArgumentParser:
    """The argument parser: every command listed, the arguments of those in ``load`` (default: all).

    Args:
        table: the declared commands (default: `registry.load_table()`).
        load: the commands whose modules are imported and whose arguments are added.
    """
    table = load_table() if table is None else table
    parser = argparse.ArgumentParser(
        prog="rvguard", description="A trusted floor under an untrusted learner."
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for entry in table.values():
        p = sub.add_parser(entry.name, help=entry.help, description=entry.help)
        if load is None or entry.name in load:
            command = entry.load()
            command.add_arguments(p)
            p.set_defaults(run=command.run)
        if entry.name == EXPERIMENT:
            forwarded = sorted(e.name for e in table.values() if e.experiment)
            p.epilog = "".join(f"`rvguard experiment {n} ...` runs `rvguard {n} ...`. " for n in forwarded)
    return parser


def _route(argv: list[str], table: dict[str, Entry]) -> tuple[str | None, list[str]]:
    """The command named in ``argv`` (None: none yet) and the argv to parse for it."""
    name = next((a for a in argv if not a.startswith("-")), None)
    if name == EXPERIMENT:
        rest = argv[argv.index(name) + 1 :]
        if rest and rest[0] in table and table[rest[0]].experiment:
            return rest[0], rest
    return name, argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 holds, 1 fails, 2 bad input)."""
    os.environ.setdefault(PYDANTIC_PLUGINS, "__all__")
    table = load_table()
    name, args_list = _route(list(sys.argv[1:] if argv is None else argv), table)
    try:
        parser = build_parser(table, load=() if name is None else (name,))
        args = parser.parse_args(args_list)
    except SystemExit as stop:  # --help, --version (0) or a usage error (2): returned, as every exit is
        return stop.code if isinstance(stop.code, int) else EXIT_INPUT
    except ModuleNotFoundError as err:  # a command's module needs an extra that is not installed
        return _missing(name or "", err)
    shown = sys.stderr.isatty() and not getattr(args, "json", False)  # bars only for a person
    try:
        with progress.display() if shown else contextlib.nullcontext():
            return exit_code(args.run(args))
    except (RvguardError, OSError) as err:  # bad input; anything else is a bug and keeps its traceback
        return report_error(args.command, err)
    except ModuleNotFoundError as err:
        return _missing(args.command, err)


def _missing(command: str, err: ModuleNotFoundError) -> int:
    """Exit 2 naming the extra to install; a module missing for any other reason is a bug (re-raised)."""
    extra = missing_extra(err)
    if extra is None:
        raise err
    return report_error(command, extra)
