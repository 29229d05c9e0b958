"""Lazy access to z3: the only place rvguard.verify touches the import.

``import rvguard`` and ``import rvguard.verify`` never load z3; every solver
entry point calls `load_z3` inside the function that needs it.
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from types import ModuleType
from typing import Any

from ..errors import MissingExtraError

__all__ = ["as_number", "load_z3", "real"]


def load_z3() -> ModuleType:
    """Import and return the ``z3`` module.

    Raises:
        MissingExtraError: z3-solver is not installed (``rvguard[smt]``).
    """
    try:
        return importlib.import_module("z3")
    except ImportError:
        raise MissingExtraError("z3-solver", "smt") from None


def real(z3: ModuleType, value: float | int | Fraction) -> Any:
    """An exact z3 real for ``value``, read from its decimal repr (0.66 is 33/50)."""
    if isinstance(value, Fraction):
        return z3.Q(value.numerator, value.denominator)
    return z3.RealVal(repr(float(value)) if isinstance(value, float) else str(value))


def as_number(z3: ModuleType, term: Any) -> float | int:
    """A model value as a Python int (integer sorts) or float (reals)."""
    if z3.is_int_value(term):
        return int(term.as_long())
    if z3.is_rational_value(term):
        frac = term.as_fraction()
        return float(frac)
    if z3.is_algebraic_value(term):
        return float(term.approx(12).as_fraction())
    raise TypeError(f"not a numeric model value: {term!r}")
