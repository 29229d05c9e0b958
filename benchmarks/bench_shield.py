"""The shield's cost per event: the decision core alone; with property tables in shadow beside it
(``GuardConfig(properties=[...], shadow=True)``); and with one user table enforced live (the gate the
core asks before each admission and dispatch, as ``GuardConfig(properties=[...])`` runs it).

Run: ``python benchmarks/bench_shield.py [N]``. Each request is one arrival, its admission,
dispatch and completion (four events) through `DecisionCore`; the hook sees each event the core
emits, as the Guard hands them over (`ShieldHook.through`). CPU time of the process (a shared
machine's waits left out), medians over repeats, per event, all in one run; the ratio is over the
core alone (the aim is ≤ 2× in shadow). Without tables the Guard
has no hook and pays nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rvguard.contract import Contract
from rvguard.enforce.core import DecisionCore
from rvguard.enforce.gate import tables_hook
from rvguard.enforce.request import Request
from rvguard.events import Proposal
from rvguard.properties import BUILTIN, PropertyTable
from rvguard.properties.load import load_properties

REPEATS = 7
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
BUILTIN_TABLES = [BUILTIN[k] for k in ("AF", "DR", "RB", "CAP", "PR")]


def run(n: int, tables: Sequence[PropertyTable] | None, *, enforce: bool = False) -> float:
    """Seconds per event for n requests through the core, and the tables' hook when given: in
    shadow, or enforced (``enforce``: the core asks the gate before each admission and dispatch)."""
    core = DecisionCore(CONTRACT)
    hook = None if tables is None else tables_hook(core, tables, None, shadow=not enforce)
    events = 0
    t0 = time.process_time()
    for i in range(n):
        now = i * 0.01
        out = core.arrive(Request(f"r{i}", "assured" if i % 2 else "opp", now), YES, now)
        if hook is not None:
            out = hook.through(out)
        if any(ev.kind.value == "dispatch" for ev in out):
            done = core.finish(f"r{i}", now)
            out += done if hook is None else hook.through(done)
        events += len(out)
    return (time.process_time() - t0) / events


def main(n: int = 20_000) -> None:
    """Each repeat runs every variant once, in turn (a shared machine's load drifts alike over
    all of them); medians over the repeats, per event, and each over the core's median."""
    variants: dict[str, Callable[[], float]] = {
        "alone": lambda: run(n, None),
        "+ shadow, AF, DR, RB, CAP, PR (built-in)": lambda: run(n, BUILTIN_TABLES),
        "+ shadow, TENANT_CONCURRENCY (user)": lambda: run(n, USER),
        "+ enforced, TENANT_CONCURRENCY (user)": lambda: run(n, USER, enforce=True),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(REPEATS):
        for label, fn in variants.items():
            times[label].append(fn())
    core = statistics.median(times["alone"])
    for label, ts in times.items():
        m = statistics.median(ts)
        print(f"core {label:42s} {m * 1e6:6.2f} µs/event  ({m / core:.2f}× the core)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
