"""Exit codes and the one mapping from an outcome or an error to them (DESIGN §8).

0 = everything checked holds, 1 = a property or obligation fails (or the screen rejects),
2 = bad input: an error naming the file, line or field, never a traceback. Commands return
a bool or raise; only this module turns either into a number.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from ..errors import RvguardError

__all__ = ["EXIT_FAIL", "EXIT_INPUT", "EXIT_OK", "exit_code", "report_error"]

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


def exit_code(holds: bool) -> int:
    """The exit code of a command that ran to the end: 0 when it holds, 1 when it fails."""
    return EXIT_OK if holds else EXIT_FAIL


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
