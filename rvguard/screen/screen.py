"""Deprecated alias of `rvguard.screen.predict` (for one release; import from `rvguard.screen`).

``rvguard.screen.screen`` named a package's module and its main function at once. Importing
this module warns; it is callable like the function it shadows, so ``rvguard.screen.screen(...)``
keeps working even after this module is imported.
"""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

from .predict import *  # noqa: F403 - the alias re-exports the module it stands for
from .predict import __all__ as __all__
from .predict import screen as _screen


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _screen(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
warnings.warn(
    "rvguard.screen.screen is deprecated: import from rvguard.screen (or rvguard.screen.predict)",
    DeprecationWarning,
    stacklevel=2,
)
