"""rvguard: a trusted floor under an untrusted learner in LLM serving.

The public names below are the stable interface; everything else is
reachable through its subpackage (`rvguard.monitors`, `rvguard.io`,
`rvguard.enforce`, `rvguard.verify`, `rvguard.sim`). Importing the package
imports none of them: each loads on first use (`rvguard._lazy`).
"""

from __future__ import annotations

import os
import typing

from ._lazy import attach as _attach

if os.environ.get("RVGUARD_PURE") == "1":  # run the .py sources even in a compiled build
    from ._compiled import force_pure

    force_pure()
elif os.environ.get("RVGUARD_COMPILED_TREE"):  # a checkout running its compiled tree (make compiled)
    from . import _compiled

    _compiled.use_tree(os.environ["RVGUARD_COMPILED_TREE"])

if typing.TYPE_CHECKING:
    from .contract import Contract as Contract
    from .contract import load_contract as load_contract
    from .errors import RvguardError as RvguardError
    from .errors import SpecError as SpecError
    from .errors import TraceError as TraceError
    from .events import Admit as Admit
    from .events import Arrive as Arrive
    from .events import Complete as Complete
    from .events import Dispatch as Dispatch
    from .events import Drop as Drop
    from .events import Event as Event
    from .events import Fail as Fail
    from .events import Proposal as Proposal
    from .events import Reject as Reject
    from .monitors import Monitor as Monitor
    from .monitors import TimedAutomaton as TimedAutomaton
    from .verdict import Violation as Violation

__version__ = "0.1.0"

__all__ = [
    "Admit",
    "Arrive",
    "Complete",
    "Contract",
    "Dispatch",
    "Drop",
    "Event",
    "Fail",
    "Monitor",
    "Proposal",
    "Reject",
    "RvguardError",
    "SpecError",
    "TimedAutomaton",
    "TraceError",
    "Violation",
    "load_contract",
]

__getattr__, __dir__ = _attach(
    __name__,
    {
        ".contract": ("Contract", "load_contract"),
        ".errors": ("RvguardError", "SpecError", "TraceError"),
        ".events": ("Admit", "Arrive", "Complete", "Dispatch", "Drop", "Event", "Fail", "Proposal", "Reject"),
        ".monitors": ("Monitor", "TimedAutomaton"),
        ".verdict": ("Violation",),
    },
)
