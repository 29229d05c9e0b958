"""Deprecated alias of `rvguard.screen.queueing` (for one release).

Renamed: the screen's queueing formulas, not a learned model.

Importing this module warns; every name it had is the same object in `rvguard.screen.queueing`.
"""

from __future__ import annotations

import sys
import warnings

from . import queueing as _renamed

sys.modules[__name__] = _renamed
warnings.warn(
    "rvguard.screen.model is deprecated: import rvguard.screen.queueing", DeprecationWarning, stacklevel=2
)
