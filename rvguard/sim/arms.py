"""Deprecated alias of `rvguard.sim.runner` (for one release).

Renamed: the one loop that runs every experiment's arms.

Importing this module warns; every name it had is the same object in `rvguard.sim.runner`.
"""

from __future__ import annotations

import sys
import warnings

from . import runner as _renamed

sys.modules[__name__] = _renamed
warnings.warn("rvguard.sim.arms is deprecated: import rvguard.sim.runner", DeprecationWarning, stacklevel=2)
