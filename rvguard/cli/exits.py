"""Exit codes and the one mapping from an outcome or an error to them (DESIGN §8).

0 = everything checked holds, 1 = a property or obligation fails (or the screen rejects),
2 = bad input: an error naming the file, line or field, never a traceback, 3 (`rvguard check`
only) = every property holds as far as the guard is concerned, but the trace has attributed
misses: SF misses under a broken precondition, AF refusals the trace declares, or a ``--property``
table's breaks a ``shield`` alert declares (a floor admission or dispatch went first). Commands return
a bool or raise; only this module turns either into a number.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from ..errors import MissingExtraError, RvguardError

__all__ = [
    "EXIT_ATTRIBUTED",
    "EXIT_FAIL",
    "EXIT_INPUT",
    "EXIT_OK",
    "EXTRA_OF",
    "exit_code",
    "missing_extra",
    "report_error",
]

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_ATTRIBUTED = 0, 1, 2, 3

#: the optional dependencies (top-level import name) and the extra of pyproject.toml that brings each
EXTRA_OF = {
    "z3": "smt",
    "pyarrow": "parquet",
    "httpx": "http",
    "matplotlib": "sim",
    "redis": "fleet",
    "starlette": "gateway",
    "uvicorn": "gateway",
    "prometheus_client": "gateway",
    "dask": "dask",
    "distributed": "dask",
}


def exit_code(holds: bool | int) -> int:
    """The exit code of a command that ran to the end: 0 when it holds, 1 when it fails (a command
    that says more, as `rvguard check` with `EXIT_ATTRIBUTED`, returns the code itself)."""
    if isinstance(holds, bool):
        return EXIT_OK if holds else EXIT_FAIL
    return holds


def missing_extra(err: ModuleNotFoundError) -> MissingExtraError | None:
    """The `MissingExtraError` for an optional dependency that is not installed (None: not one).

    Commands import their optional dependencies lazily, some deep inside; whichever import fails,
    the user is told which extra to install instead of seeing a traceback.
    """
    top = (err.name or "").partition(".")[0]
    return MissingExtraError(top, EXTRA_OF[top]) if top in EXTRA_OF else None


def report_error(command: str, err: RvguardError | OSError, stream: TextIO | None = None) -> int:
    """Say what went wrong on ``stream`` (stderr) and return the exit code.

    An `RvguardError` and an `OSError` (a missing, unreadable or directory path) are bad input
    (2); a broken pipe (the reader went away, as with ``| head``) ends quietly with 0. Any
    other exception is a bug: the CLI does not catch it, so it keeps its traceback.
    """
    stream = sys.stderr if stream is None else stream
    if isinstance(err, BrokenPipeError):  # as the Python docs advise: no second error at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    if isinstance(err, RvguardError):
        print(f"rvguard {command}: error: {err}", file=stream)
        return EXIT_INPUT
    where = f"{err.filename}: " if err.filename else ""
    print(f"rvguard {command}: error: {where}{err.strerror or err}", file=stream)
    return EXIT_INPUT
