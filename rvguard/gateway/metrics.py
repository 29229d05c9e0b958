"""Deprecated alias of `rvguard.gateway.prometheus` (for one release).

Renamed: its Prometheus exposition, not the contract metrics of rvguard.monitors.metrics.

Importing this module warns; every name it had is the same object in `rvguard.gateway.prometheus`.
"""

from __future__ import annotations

import sys
import warnings

from . import prometheus as _renamed

sys.modules[__name__] = _renamed
warnings.warn(
    "rvguard.gateway.metrics is deprecated: import rvguard.gateway.prometheus",
    DeprecationWarning,
    stacklevel=2,
)
