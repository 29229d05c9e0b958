"""The built-in tables against the hand-written fast paths: equal verdicts and witnesses.

The hand-written monitors (`rvguard.monitors`) are the fast paths; the tables
(`rvguard.properties.builtin`) are the definition. Each comparison runs both on the same traces:
the shared strategy (tests/monitors/strategies.py, runbook kinds included), its WF-breaking
mutations, and a seeded batch of 10,000 generated traces. Per run, each of WF, AF (both sides),
DR, RB, CAP and PR is compared on 10,200 traces: 10,000 seeded (4 seeds × 2,500) and 100 hypothesis
examples of each strategy (the profile's default ``max_examples``). On the 10,000 seeded traces the
hand-written offline judge (`check_offline`: vectorised on a protocol-clean trace, the monitor's
replay otherwise) is compared with the tables too, and most must take its vectorised path. AF's
upper side and CAP are also compared with a brute-force count written here from DESIGN §11's text
(2,100 traces). One hand-written clause has no table and is left out of the comparison: CAP's per
engine (C_e).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.contract import Contract
from rvguard.events import Admit, Arrive, Basis, Dispatch, Event, EventKind, Reject
from rvguard.monitors import Monitor
from rvguard.monitors.offline import check_offline
from rvguard.properties import BUILTIN, TableMonitor
from rvguard.properties.offline import check_columns
from rvguard.verdict import Violation
from rvguard.watch_events import FLOOR_REFUSED
from tests.monitors.strategies import small_contract, wellformed_traces

from ._traces import mutated_traces, random_trace

#: the properties both sides define on this branch
BOTH = ("WF", "AF", "DR", "RB", "CAP", "PR")
ENDS = {"complete", "fail", "drop"}


def _key(vs: Sequence[Violation]) -> list[tuple[str, str, float, tuple[Event, ...]]]:
    return [(v.property, v.rid, v.t, v.witness) for v in vs]


def _without_engine_clause(vs: Sequence[Violation]) -> list[Violation]:
    """The hand-written violations the tables define: CAP's per-engine clause (at most C_e on each
    engine a route or relocation names) has no table (the table form has no per-engine scope)."""
    return [v for v in vs if not (v.property == "CAP" and v.context.get("clause") == "C_e")]


def _compare(contract: Contract, trace: list[Event], *, offline: bool = False) -> dict[str, int]:
    """The tables' violations equal the hand-written monitor's (and, with ``offline``, the hand-written
    offline judge's; counted under ``vectorised`` when it took its vectorised path): counts by property."""
    hand = Monitor(contract, properties=BOTH)
    hand.feed_all(trace)
    table = TableMonitor(contract, [BUILTIN[n] for n in BOTH])
    table.feed_all(trace)
    assert _key(table.violations()) == _key(_without_engine_clause(hand.violations()))
    counts: dict[str, int] = defaultdict(int)
    for v in table.violations():
        counts[v.property] += 1
    if offline:
        judged = check_offline(ColumnarTrace.from_events(trace), contract, BOTH)
        assert _key(table.violations()) == _key(_without_engine_clause(judged.violations))
        counts["vectorised"] += judged.vectorised
    return counts


contracts = st.builds(
    small_contract, st.sampled_from(["count", "tokens"]), st.sampled_from([0.0, 0.3]), st.integers(0, 2)
)


@given(contracts, wellformed_traces(runbook=True))
def test_tables_equal_hand_written_on_the_shared_strategy(contract: Contract, trace: list[Event]) -> None:
    _compare(contract, trace)


@given(contracts, mutated_traces())
def test_tables_equal_hand_written_on_wf_breaking_traces(contract: Contract, trace: list[Event]) -> None:
    _compare(contract, trace)


@pytest.mark.parametrize("seed", range(4))
def test_tables_equal_hand_written_on_a_seeded_batch(seed: int) -> None:
    """2,500 traces per seed (10,000 in all), about 3 % of events breaking the protocol; every
    property must be seen violated, or the comparison proves little, and the offline judge must
    take its vectorised path on most (the protocol-clean ones, about 58 %)."""
    rng = random.Random(seed)
    seen: dict[str, int] = defaultdict(int)
    for i in range(2500):
        contract = _CONTRACTS[i % len(_CONTRACTS)]
        for name, n in _compare(contract, random_trace(rng, steps=30), offline=True).items():
            seen[name] += n
    assert set(seen) == {*BOTH, "vectorised"}, seen
    assert seen["vectorised"] > 1250, seen


_CONTRACTS = [small_contract(c, e, r) for c in ("count", "tokens") for e in (0.0, 0.3) for r in (0, 1)]


def brute_af_upper(contract: Contract, trace: list[Event]) -> list[tuple[str, float]]:
    """DESIGN §11, AF's upper side, count credits: of a tenant's arrivals in one window, at most B
    are admitted on the floor; each floor admission beyond B is a violation (rid, time)."""
    tenant: dict[str, str] = {}
    window: dict[str, int] = {}
    granted: dict[tuple[str, int], int] = defaultdict(int)
    out = []
    for ev in trace:
        if ev.kind is EventKind.ARRIVE and ev.rid not in tenant:
            tenant[ev.rid] = ev.tenant  # type: ignore[attr-defined]
            window[ev.rid] = int((ev.t - contract.epoch) // contract.window)
        elif isinstance(ev, Admit) and ev.basis is Basis.FLOOR:
            key = (tenant[ev.rid], window[ev.rid])
            granted[key] += 1
            if granted[key] > contract.tenants[key[0]].floor:
                out.append((ev.rid, ev.t))
    return out


def brute_cap(contract: Contract, trace: list[Event]) -> list[tuple[str, float]]:
    """DESIGN §11, CAP: at every instant at most C requests in flight (dispatched, not ended nor
    evicted); each dispatch that makes more is a violation (rid, time)."""
    running: set[str] = set()
    out = []
    for ev in trace:
        if isinstance(ev, Dispatch):
            running.add(ev.rid)
            if len(running) > contract.slots:
                out.append((ev.rid, ev.t))
        elif ev.kind.value in ENDS or ev.kind is EventKind.EVICT:
            running.discard(ev.rid)
    return out


def _table(contract: Contract, name: str, trace: list[Event], kind: EventKind) -> list[tuple[str, float]]:
    """The table's violations at events of ``kind``, in trace order; at an admit, those on the floor
    basis only (AF's upper side; an entitled request admitted as demoted is its lower side)."""
    mon = TableMonitor(contract, [BUILTIN[name]])
    last = [(v, v.witness[-1]) for v in mon.feed_all(trace)]
    return [
        (v.rid, v.t) for v, e in last if e.kind is kind and getattr(e, "basis", Basis.FLOOR) is Basis.FLOOR
    ]


@given(st.sampled_from([0.0, 0.3]), wellformed_traces(runbook=True))
def test_af_upper_side_and_cap_equal_a_brute_force_count(epoch: float, trace: list[Event]) -> None:
    contract = small_contract("count", epoch)
    assert _table(contract, "AF", trace, EventKind.ADMIT) == brute_af_upper(contract, trace)
    assert _table(contract, "CAP", trace, EventKind.DISPATCH) == brute_cap(contract, trace)


def test_af_upper_side_and_cap_seeded_batch() -> None:
    """The same on 2,000 generated traces, where both clauses are seen violated."""
    rng = random.Random(7)
    contract = small_contract("count")
    seen = [0, 0]
    for _ in range(2000):
        trace = random_trace(rng, steps=30, odd=0.0)
        af, cap = brute_af_upper(contract, trace), brute_cap(contract, trace)
        assert _table(contract, "AF", trace, EventKind.ADMIT) == af
        assert _table(contract, "CAP", trace, EventKind.DISPATCH) == cap
        seen[0] += len(af)
        seen[1] += len(cap)
    assert min(seen) > 0, seen


@pytest.mark.parametrize("declared", [False, True])
@pytest.mark.parametrize("refusal", ["reject", "demoted"])
def test_af_declared_exceptions(refusal: str, declared: bool) -> None:
    """An entitled request rejected, or admitted as demoted, breaks AF unless the decision records a
    declared refusal of the floor (``floor_refused``: a pool's refusal, a declared lowering): then the
    table reaches DECLARED, online and offline alike. The hand-written AF reports both; `rvguard
    check` counts the declared one apart (its attribution)."""
    contract = small_contract("count")
    extra = {FLOOR_REFUSED: "pool-exhausted"} if declared else {}
    decision = (
        Reject(0.1, "r0", "r", extra) if refusal == "reject" else Admit(0.1, "r0", Basis.DEMOTED, extra)
    )
    trace = [Arrive(0.0, "r0", "a", max_tokens=4), decision]
    online = TableMonitor(contract, [BUILTIN["AF"]]).feed_all(trace)
    offline = check_columns(contract, [BUILTIN["AF"]], trace)
    assert offline.paths == {"AF": "vectorised"}
    assert [(v.rid, v.t) for v in online] == [(v.rid, v.t) for v in offline.violations]
    assert len(online) == (0 if declared else 1)
    hand = Monitor(contract, properties=("AF",))
    assert len(hand.feed_all(trace)) == 1
