"""Properties as tables: the definition the monitors, the offline checker, the shield and Z3 share.

DESIGN §11: one table per property (`PropertyTable`: locations, counters, edges with guards in a
small linear-arithmetic language, remedies), compiled to an online monitor (`TableMonitor`), an
offline checker (`check_columns`), a shield stepped before every controllable event (`Shield`)
and Z3 obligations (`rvguard.properties.obligations`, imported on demand: it needs z3).
"""

from __future__ import annotations

from .builtin import BUILTIN as BUILTIN
from .monitor import TableMonitor as TableMonitor
from .table import Counter as Counter
from .table import Edge as Edge
from .table import PropertyTable as PropertyTable
from .table import Remedy as Remedy
from .table import Scope as Scope
from .table import edge as edge

__all__ = ["BUILTIN", "Counter", "Edge", "PropertyTable", "Remedy", "Scope", "TableMonitor", "edge"]
