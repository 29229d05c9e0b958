"""Deprecated alias of `rvguard.columnar` (for one release): the columnar trace is a data structure, not I/O.

Importing this module warns; every name it had is the same object in `rvguard.columnar`.
"""

from __future__ import annotations

import warnings

from ..columnar import *  # noqa: F403 - the alias re-exports the module it stands for
from ..columnar import __all__ as __all__

warnings.warn(
    "rvguard.io.columnar is deprecated: import ColumnarTrace from rvguard.columnar",
    DeprecationWarning,
    stacklevel=2,
)
