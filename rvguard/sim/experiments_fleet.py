"""``fleet-pooling``: the reserve a fleet needs, pooled behind the router vs siloed per engine.

The runbook's claim (Proposition 6): pooling the bridging reserve behind a
shared router needs a strictly smaller fraction of the fleet's capacity than
siloed per-engine reserves, and the saving grows with the number of engines
N (square-root staffing). Measured on `rvguard.sim.fleet`: for each N, the
smallest reserve whose assured arrivals wait (find no free slot) in at most
``TARGET`` of cases, found by bisection on the reserve with the same arrivals
at every step (paired random numbers), in every rep; the condition reports
the largest over reps (conservative) and the miss measured there. Erlang B
(a lost-call model: blocked arrivals leave) is printed beside it as a
reference, not as the answer: here blocked arrivals wait and then hold a
slot, which the simulation keeps.

The fleet's shape is the experiment's (``SLOTS`` per engine, ``LOAD``
Erlangs of assured work per engine, surplus saturating); the contract sets
only the time scale (its ``s_max`` is the mean assured service), which
leaves every fraction unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from ..contract import Contract
from .experiments import ExperimentResult
from .fleet import FleetModel, FleetRun, Layout, simulate_fleet
from .record import Condition, RunRecord

__all__ = ["ENGINES", "LOAD", "SLOTS", "TARGET", "erlang_b", "fleet_pooling", "plot_pooling"]

ENGINES: tuple[int, ...] = (1, 2, 4, 8)
SLOTS = 16
LOAD = 4.0
TARGET = 0.01
ARRIVALS = 10_000


def erlang_b(servers: int, load: float) -> float:
    """Blocking probability of an M/G/c/c loss system (the recurrence, stable for large c).

    >>> round(erlang_b(2, 1.0), 4)
    0.2
    """
    b = 1.0
    for k in range(1, servers + 1):
        b = load * b / (k + load * b)
    return b


def _smallest(limit: int, ok: Callable[[int], bool]) -> int:
    """The smallest r in [0, limit] with ok(r), for ok monotone (limit if none)."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _needed(model: FleetModel, layout: Layout, seed: int, arrivals: int) -> tuple[int, FleetRun]:
    limit = SLOTS if layout == "siloed" else model.engines * SLOTS
    runs: dict[int, FleetRun] = {}

    def ok(r: int) -> bool:
        runs[r] = simulate_fleet(model, layout, r, arrivals=arrivals, rng=random.Random(seed))
        return runs[r].miss <= TARGET

    r = _smallest(limit, ok)
    if r not in runs:
        ok(r)
    return r, runs[r]


def _condition(n: int, layout: Layout, found: list[tuple[int, FleetRun]]) -> Condition:
    capacity = SLOTS if layout == "siloed" else n * SLOTS
    worst = max(r for r, _ in found)
    reference = next(r for r in range(capacity + 1) if erlang_b(r, LOAD * capacity / SLOTS) <= TARGET)
    return Condition(
        {"engines": n, "layout": layout, "reserve_fraction": worst / capacity},
        tuple(RunRecord(missed=run.missed, judged=run.arrived) for _, run in found),
        {
            "reserve_slots": worst,
            "reserve_fractions_per_rep": [r / capacity for r, _ in found],
            "erlang_b_fraction": reference / capacity,
        },
    )


def fleet_pooling(
    contract: Contract,
    *,
    reps: int = 3,
    seed: int = 0,
    engines: tuple[int, ...] = ENGINES,
    arrivals: int = ARRIVALS,
) -> ExperimentResult:
    """Smallest reserve fraction meeting ``TARGET`` per N, pooled (P2C) and siloed."""
    conditions = []
    for n in engines:
        model = FleetModel(engines=n, slots=SLOTS, assured_load=LOAD, service_mean=contract.service.s_max)
        for layout in ("pooled", "siloed"):
            found = [_needed(model, layout, seed * 1000 + rep, arrivals) for rep in range(reps)]
            conditions.append(_condition(n, layout, found))
    return ExperimentResult("fleet-pooling", tuple(conditions), x_key="engines", group_keys=("layout",))


def plot_pooling(result: ExperimentResult, path: str | Path) -> Path:
    """Write the needed reserve fraction against N, measured and the Erlang B reference."""
    from .plots import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for layout, colour in (("siloed", "tab:red"), ("pooled", "tab:blue")):
        cs = sorted(
            (c for c in result.conditions if c.params["layout"] == layout), key=lambda c: c.params["engines"]
        )
        xs = [c.params["engines"] for c in cs]
        ax.plot(
            xs, [c.params["reserve_fraction"] for c in cs], "o-", color=colour, label=f"{layout} (measured)"
        )
        ax.plot(
            xs, [c.info["erlang_b_fraction"] for c in cs], "--", color=colour, label=f"{layout} (Erlang B)"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("engines N")
    ax.set_ylabel(f"reserve fraction for ≤ {TARGET:.0%} waits")
    ax.set_title(f"reserve needed: {SLOTS} slots, {LOAD:g} Erlangs assured per engine")
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
