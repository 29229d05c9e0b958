"""The shield's cost per event: the decision core alone, and with the shield of property tables
stepped beside it (shadow, as ``Guard(properties=[...])`` runs it).

Run: ``python benchmarks/bench_shield.py [N]``. Each request is one arrival, its admission,
dispatch and completion (four events) through `DecisionCore`; the shield sees each event the core
emits. Medians over repeats, per event; the ratio is core + shield over the core alone (the aim is
≤ 2× for the shield in shadow). Without tables the Guard has no shield and pays nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.request import Request
from rvguard.events import Proposal
from rvguard.properties import BUILTIN, PropertyTable
from rvguard.properties.load import load_properties
from rvguard.properties.shield import Shield

REPEATS = 5
CONTRACT = Contract.model_validate(
    {
        "window": 1.0,
        "slots": 4,
        "service": {"s_max": 0.66},
        "tenants": {
            "assured": {"floor": 6, "deadline": 1.82, "tier": 0},
            "opp": {"deadline": 1.82, "tier": 1},
        },
    }
)
USER = load_properties(
    Path(__file__).resolve().parent.parent / "examples" / "properties" / "tenant_concurrency.yaml"
)
YES = Proposal()


def run(n: int, tables: Sequence[PropertyTable] | None) -> float:
    """Seconds per event for n requests through the core (and the shield when tables are given)."""
    core = DecisionCore(CONTRACT)
    shield = None if tables is None else Shield(CONTRACT, tables)
    events = 0
    t0 = time.perf_counter()
    for i in range(n):
        now = i * 0.01
        out = core.arrive(Request(f"r{i}", "assured" if i % 2 else "opp", now), YES, now)
        if any(ev.kind.value == "dispatch" for ev in out):
            out += core.finish(f"r{i}", now)
        events += len(out)
        if shield is not None:
            for ev in out:
                shield.decide(ev, shadow=True)
    return (time.perf_counter() - t0) / events


def median(fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(REPEATS))


def main(n: int = 20_000) -> None:
    core = median(lambda: run(n, None))
    print(f"core alone:                        {core * 1e6:6.2f} µs/event")
    for label, tables in (
        ("AF, DR, RB, CAP, PR (built-in)", [BUILTIN[k] for k in ("AF", "DR", "RB", "CAP", "PR")]),
        ("TENANT_CONCURRENCY (user)", USER),
    ):
        both = median(lambda tables=tables: run(n, tables))
        print(f"core + shield {label:32s} {both * 1e6:6.2f} µs/event  ({both / core:.2f}× the core)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
