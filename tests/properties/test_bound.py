"""The compiled tables (`rvguard.properties.bound`): each guard, each edge's updates, each kind's
choice of edge and each kind's step compiled once to one function that names nothing of the table,
the closures kept for guards too deep for one expression, and the second of two complementary
edges taken without its guard."""

from __future__ import annotations

import random
import re
from pathlib import Path

from rvguard.lifecycle import CODE, N_KINDS
from rvguard.properties import BUILTIN, TableMonitor
from rvguard.properties.bound import BoundTable, stepper
from rvguard.properties.guards import SOURCE_DEPTH, Not, depth
from rvguard.properties.load import load_properties
from rvguard.properties.table import Counter, PropertyTable, Scope, edge
from tests.monitors.strategies import small_contract

from ._traces import random_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "properties"
#: what a compiled function may name: the context's attributes, dict.get, and its bound values
ATTRIBUTES = {"t", "ev", "inst", "stores", "facts", "vars", "tenant", "tw", "get", "basis", "reason"}
BOUND = re.compile(r"v\d+")


def _tables() -> list[PropertyTable]:
    return [*BUILTIN.values(), *(t for f in sorted(EXAMPLES.glob("*.yaml")) for t in load_properties(f))]


def test_compiled_functions_name_nothing_of_the_table() -> None:
    """The generated source holds no name, number or text of the table: each is a bound value."""
    compiled = 0
    for table in _tables():
        bound = BoundTable(table, small_contract(), 0)
        functions = [f for be in (be for e in bound.edges for be in e or ()) for f in (be.guard, be.take)]
        steppers = [stepper([bound], small_contract(), code) for code in bound.codes]
        for fn in [*functions, *bound.choosers, *steppers]:
            if fn is not None:
                code = fn.__code__
                assert code.co_filename == "<rvguard.properties guard>"
                assert {n for n in code.co_names if not BOUND.fullmatch(n)} <= ATTRIBUTES, table.name
                assert not [c for c in code.co_consts if isinstance(c, str)], table.name
                compiled += 1
    assert compiled > 50


def test_the_complement_of_an_earlier_guard_is_not_evaluated() -> None:
    """AF's arrival edges are ``g`` then ``not (g)``: the second is taken whenever it is tried."""
    af = BoundTable(BUILTIN["AF"], small_contract(), 0)
    first, second = af.edges[af.index["NEW"] * N_KINDS + CODE["arrive"]] or ()
    assert isinstance(second.edge.guard, Not) and second.edge.guard.arg == first.edge.guard
    assert first.guard is not None and second.guard is None


def _limit(name: str, room: str, step: str) -> PropertyTable:
    """CAP written with the guard ``room`` and the update ``n += step``."""
    return PropertyTable(
        name=name,
        description="requests in flight within the slots",
        locations=("NEW", "QUEUED", "RUNNING", "OVER", "DONE"),
        initial="NEW",
        bad="OVER",
        counters=(Counter("n", Scope.SHARED),),
        edges=(
            edge("NEW", "admit", "QUEUED"),
            edge("QUEUED", "dispatch", "RUNNING", room, [f"n += {step}"]),
            edge("QUEUED", "dispatch", "OVER", f"not ({room})", [f"n += {step}"], "delay"),
            *(
                edge(s, k, "DONE", updates=["n -= 1"])
                for s in ("RUNNING", "OVER")
                for k in ("complete", "fail")
            ),
        ),
    )


def test_a_guard_too_deep_for_one_expression_runs_as_closures_with_the_same_verdicts() -> None:
    zeros = " + 0" * (SOURCE_DEPTH + 4)
    shallow = _limit("SHALLOW", "n + 1 <= slots", "1")
    deep = _limit("DEEP", f"n{zeros} + 1 <= slots", f"1{zeros}")
    bound = BoundTable(deep, small_contract(), 0)
    (be, _) = bound.edges[bound.index["QUEUED"] * N_KINDS + CODE["dispatch"]] or ()
    assert depth(be.edge.guard) > SOURCE_DEPTH and be.guard is not None and be.take is not None
    assert be.guard.__code__.co_filename != "<rvguard.properties guard>"  # closures
    assert be.take.__code__.co_filename != "<rvguard.properties guard>"
    rng = random.Random(5)
    found = 0
    for _ in range(300):
        monitor = TableMonitor(small_contract(), [shallow, deep])
        verdicts = monitor.feed_all(random_trace(rng, steps=40, odd=0.0))
        by_name = {
            n: [(v.rid, v.t, v.witness) for v in verdicts if v.property == n] for n in ("SHALLOW", "DEEP")
        }
        assert by_name["SHALLOW"] == by_name["DEEP"]
        found += len(by_name["DEEP"])
    assert found > 20  # the traces did overfill the slots
