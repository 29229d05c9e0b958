"""Deprecated alias of `rvguard.verify.preconditions` (for one release).

Renamed: the contract's preconditions, not `rvguard check` of a trace.

Importing this module warns; every name it had is the same object in `rvguard.verify.preconditions`.
"""

from __future__ import annotations

import sys
import warnings

from . import preconditions as _renamed

sys.modules[__name__] = _renamed
warnings.warn(
    "rvguard.verify.check is deprecated: import rvguard.verify.preconditions",
    DeprecationWarning,
    stacklevel=2,
)
