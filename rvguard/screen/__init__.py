"""The P95 screen (DESIGN §6): a queueing-model estimate, labelled "screen, not a guarantee".

`screen` predicts the assured P95 sojourn from a contract and a workload
summary; `rvguard.screen.evaluate` measures how far that prediction can be
trusted against the simulator (``rvguard experiment screen-eval``).
"""

from __future__ import annotations

from .model import ServiceDistribution as ServiceDistribution
from .screen import LABEL as LABEL
from .screen import Flag as Flag
from .screen import ScreenResult as ScreenResult
from .screen import TenantScreen as TenantScreen
from .screen import Workload as Workload
from .screen import screen as screen

__all__ = ["LABEL", "Flag", "ScreenResult", "ServiceDistribution", "TenantScreen", "Workload", "screen"]
