"""The P95 screen (DESIGN §6): a queueing-model estimate, labelled "screen, not a guarantee".

`screen` predicts the assured P95 sojourn from a contract and a workload
summary (`rvguard.screen.predict`); `rvguard.screen.evaluate` measures how far
that prediction can be trusted against the simulator (``rvguard screen-eval``).
Importing the package imports none of them (nor numpy): each name loads on
first use (`rvguard._lazy`).
"""

from __future__ import annotations

import typing

from .._lazy import attach as _attach

if typing.TYPE_CHECKING:
    from .predict import LABEL as LABEL
    from .predict import Flag as Flag
    from .predict import ScreenResult as ScreenResult
    from .predict import TenantScreen as TenantScreen
    from .predict import Workload as Workload
    from .predict import screen as screen
    from .queueing import ServiceDistribution as ServiceDistribution

__all__ = ["LABEL", "Flag", "ScreenResult", "ServiceDistribution", "TenantScreen", "Workload", "screen"]

__getattr__, __dir__ = _attach(
    __name__,
    {
        ".queueing": ("ServiceDistribution",),
        ".predict": ("LABEL", "Flag", "ScreenResult", "TenantScreen", "Workload", "screen"),
    },
)
