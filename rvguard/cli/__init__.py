"""The ``rvguard`` command line: thin drivers over the library (DESIGN §8).

Exit codes: 0 = holds, 1 = a property or obligation fails, 2 = bad input (`exits`).
Each package declares its commands in its own ``commands.py`` (`registry`); the program
(`program`) imports a command's module only when that command runs.
"""

from __future__ import annotations

from .program import build_parser as build_parser
from .program import main as main

__all__ = ["build_parser", "main"]
