"""The product (`rvguard.properties.engine`): `Product.step`, the shield's one-call fast path, does
what `Product.plan` and `Product.commit` do."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from rvguard.events import Event
from rvguard.properties import BUILTIN
from rvguard.properties.engine import Product
from rvguard.properties.load import load_properties
from tests.monitors.strategies import small_contract

from ._traces import random_trace
from .test_bound import SOURCE_DEPTH, _limit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "properties"
TABLES = [
    *(BUILTIN[k] for k in ("AF", "DR", "RB", "CAP", "PR", "SF")),
    *(t for f in sorted(EXAMPLES.glob("*.yaml")) for t in load_properties(f)),
    _limit("DEEP", "n" + " + 0" * (SOURCE_DEPTH + 4) + " + 1 <= slots", "1" + " + 0" * (SOURCE_DEPTH + 4)),
]


def _state(p: Product) -> Any:
    live = {rid: (list(i.locs), [e.kind for e in i.events], i.vars) for rid, i in p.live.items()}
    return [b.store for b in p.tables], live, dict(p._finished), p.now


def _planned(p: Product, ev: Event) -> bool:
    """Plan and commit as the shield's slow path would: False (nothing changed) when a table goes bad."""
    plan = p.plan(ev)
    if plan is None:
        p.advance(ev.t)
        return True
    if any(be is not None and be.bad for be in plan[2]):
        return False
    p.commit(plan)
    return True


def test_step_is_plan_then_commit() -> None:
    """On random traces (some events breaking the protocol, some tables going bad) each event moves
    both products alike: the same answer, then the same counters, instances, ends and time."""
    rng = random.Random(3)
    refused = 0
    for i in range(400):
        contract = small_contract(reserve=i % 2)
        tables = rng.sample(TABLES, rng.randint(1, len(TABLES)))
        stepped, planned = Product(contract, tables), Product(contract, tables)
        for ev in random_trace(rng, steps=40, odd=0.05):
            ok = stepped.step(ev)
            assert ok == _planned(planned, ev)
            refused += not ok
            assert _state(stepped) == _state(planned)
    assert refused > 100  # tables did go bad
