"""The enforcer: a pure decision core, learners, identity binding, the Guard runtime, dispatchers.

Importing this package imports none of its modules (each name loads on first
use, `rvguard._lazy`): ``import rvguard.enforce.core`` loads the pure core
alone, never asyncio, which the Guard and the dispatchers need.
"""

from __future__ import annotations

import typing

from .._lazy import attach as _attach

if typing.TYPE_CHECKING:
    from .core import TRANSITIONS as TRANSITIONS
    from .core import CoreStatistics as CoreStatistics
    from .core import DecisionCore as DecisionCore
    from .dispatchers import CallableDispatcher as CallableDispatcher
    from .dispatchers import Dispatcher as Dispatcher
    from .dispatchers import DispatchError as DispatchError
    from .dispatchers import MockDispatcher as MockDispatcher
    from .dispatchers import Response as Response
    from .dispatchers import VLLMDispatcher as VLLMDispatcher
    from .guard import Guard as Guard
    from .guard import JsonlSink as JsonlSink
    from .guard import MonitorSink as MonitorSink
    from .guard import Outcome as Outcome
    from .guard_config import GuardConfig as GuardConfig
    from .identity import Identity as Identity
    from .identity import IdentityBinder as IdentityBinder
    from .learners import AdmitAll as AdmitAll
    from .learners import Learner as Learner
    from .learners import LearnerFailure as LearnerFailure
    from .learners import LearnerTimeout as LearnerTimeout
    from .learners import LoadView as LoadView
    from .learners import LSQLearner as LSQLearner
    from .learners import RandomLearner as RandomLearner
    from .learners import RejectAll as RejectAll
    from .learners import consult as consult
    from .request import Request as Request
    from .watch import Alert as Alert
    from .watch import WatchConfig as WatchConfig

__all__ = [
    "TRANSITIONS",
    "AdmitAll",
    "Alert",
    "CallableDispatcher",
    "CoreStatistics",
    "DecisionCore",
    "DispatchError",
    "Dispatcher",
    "Guard",
    "GuardConfig",
    "Identity",
    "IdentityBinder",
    "JsonlSink",
    "LSQLearner",
    "Learner",
    "LearnerFailure",
    "LearnerTimeout",
    "LoadView",
    "MockDispatcher",
    "MonitorSink",
    "Outcome",
    "RandomLearner",
    "RejectAll",
    "Request",
    "Response",
    "VLLMDispatcher",
    "WatchConfig",
    "consult",
]

__getattr__, __dir__ = _attach(
    __name__,
    {
        ".core": (
            "TRANSITIONS",
            "CoreStatistics",
            "DecisionCore",
        ),
        ".dispatchers": (
            "CallableDispatcher",
            "Dispatcher",
            "DispatchError",
            "MockDispatcher",
            "Response",
            "VLLMDispatcher",
        ),
        ".guard": (
            "Guard",
            "JsonlSink",
            "MonitorSink",
            "Outcome",
        ),
        ".guard_config": ("GuardConfig",),
        ".identity": (
            "Identity",
            "IdentityBinder",
        ),
        ".learners": (
            "AdmitAll",
            "Learner",
            "LearnerFailure",
            "LearnerTimeout",
            "LoadView",
            "LSQLearner",
            "RandomLearner",
            "RejectAll",
            "consult",
        ),
        ".request": ("Request",),
        ".watch": (
            "Alert",
            "WatchConfig",
        ),
    },
)
