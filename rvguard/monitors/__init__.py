"""Timed safety automata: AF, SF, DR, WF, RB, CAP (and ND), and PR, RL, EV, ER, FR of DESIGN §10."""

from __future__ import annotations

from .automaton import Edge as Edge
from .automaton import Instance as Instance
from .automaton import TimedAutomaton as TimedAutomaton
from .automaton import Timer as Timer
from .metrics import Metrics as Metrics
from .monitor import BUILTIN as BUILTIN
from .monitor import DEFAULT_PROPERTIES as DEFAULT_PROPERTIES
from .monitor import Monitor as Monitor

__all__ = [
    "BUILTIN",
    "DEFAULT_PROPERTIES",
    "Edge",
    "Instance",
    "Metrics",
    "Monitor",
    "TimedAutomaton",
    "Timer",
]
