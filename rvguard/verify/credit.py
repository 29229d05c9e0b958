"""Deprecated alias of `rvguard.verify.af_induction` (for one release).

Renamed: k-induction of AF, not the credit meter.

Importing this module warns; every name it had is the same object in `rvguard.verify.af_induction`.
"""

from __future__ import annotations

import sys
import warnings

from . import af_induction as _renamed

sys.modules[__name__] = _renamed
warnings.warn(
    "rvguard.verify.credit is deprecated: import rvguard.verify.af_induction",
    DeprecationWarning,
    stacklevel=2,
)
