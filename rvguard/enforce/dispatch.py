"""Deprecated alias of `rvguard.enforce.dispatchers` (for one release).

Renamed: it holds the backends (dispatchers), not the core's dispatch decision.

Importing this module warns; every name it had is the same object in `rvguard.enforce.dispatchers`.
"""

from __future__ import annotations

import sys
import warnings

from . import dispatchers as _renamed

sys.modules[__name__] = _renamed
warnings.warn(
    "rvguard.enforce.dispatch is deprecated: import rvguard.enforce.dispatchers",
    DeprecationWarning,
    stacklevel=2,
)
