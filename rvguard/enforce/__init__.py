"""The enforcer: a pure decision core, learners, identity binding, the Guard runtime, dispatchers."""

from __future__ import annotations

from .core import TRANSITIONS as TRANSITIONS
from .core import CoreStatistics as CoreStatistics
from .core import DecisionCore as DecisionCore
from .request import Request as Request
from .watch import Alert as Alert
from .watch import WatchConfig as WatchConfig

__all__ = ["TRANSITIONS", "Alert", "CoreStatistics", "DecisionCore", "Request", "WatchConfig"]
