"""Hypothesis strategies: random well-formed traces over a small contract."""

from __future__ import annotations

from hypothesis import strategies as st

from rvguard.contract import Contract, contract_from_mapping
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Event, Fail, Reject
from rvguard.lifecycle import FINAL, MOVES

# Steps that land exactly on window edges (W = 1) and on deadlines are common on purpose.
STEPS = st.sampled_from([0.0, 0.0, 0.125, 0.25, 0.5, 1.0, 0.3, 1.5])


def small_contract(credit: str = "count", epoch: float = 0.0, reserve: int = 0) -> Contract:
    return contract_from_mapping(
        {
            "epoch": epoch,  # an origin off 0 moves every window edge away from the steps' grid
            "window": 1.0,
            "slots": 2,
            "reserve": reserve,
            "output_cap": 8,
            "credit": credit,
            "service": {"s_max": 0.5, "lower": {"base": 0.25, "per_token": 0.0625}, "upper": 1.0},
            "tenants": {
                "a": {"floor": 2 if credit == "count" else 12, "deadline": 1.0, "tier": 0},
                "b": {"floor": 1 if credit == "count" else 6, "deadline": 0.5, "tier": 1},
                "o": {"floor": 0, "deadline": 2.0, "tier": 2},
            },
        }
    )


#: the kinds that may follow each kind (the lifecycle's moves); completions weighted up on purpose
_NEXT = {
    kind.value: sorted(k.value for (s, k) in MOVES if s is MOVES[(stage, kind)])
    for (stage, kind) in MOVES
    if MOVES[(stage, kind)] not in FINAL
}
_NEXT["dispatch"].append("complete")


#: fail reasons: a service failure, and a client error (SF exempts the latter)
FAIL_REASONS = ("err", "client-error: http 400")


def _event(kind: str, t: float, rid: str, basis: Basis = Basis.SURPLUS, reason: str = "err") -> Event:
    if kind == "admit":
        return Admit(t, rid, basis)
    if kind == "reject":
        return Reject(t, rid, "r")
    if kind == "dispatch":
        return Dispatch(t, rid)
    if kind == "complete":
        return Complete(t, rid)
    if kind == "drop":
        return Drop(t, rid, "doomed")
    return Fail(t, rid, reason)


@st.composite
def wellformed_traces(draw: st.DrawFn, max_steps: int = 40) -> list[Event]:
    """A WF-clean trace: arrivals and protocol steps interleaved, time non-decreasing."""
    t = 0.0
    events: list[Event] = []
    live: dict[str, str] = {}
    n = 0
    for _ in range(draw(st.integers(1, max_steps))):
        t += draw(STEPS)
        if not live or draw(st.booleans()):
            rid = f"r{n}"
            n += 1
            tenant = draw(st.sampled_from(["a", "a", "b", "o"]))
            deadline = draw(
                st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.0]).map(lambda d, t0=t: t0 + d))
            )
            max_tokens = draw(st.one_of(st.none(), st.integers(0, 12)))
            events.append(Arrive(t, rid, tenant, deadline=deadline, max_tokens=max_tokens, prompt_tokens=3))
            live[rid] = "arrive"
            continue
        rid = draw(st.sampled_from(sorted(live)))
        kind = draw(st.sampled_from(_NEXT[live[rid]]))
        basis = draw(st.sampled_from(list(Basis))) if kind == "admit" else Basis.SURPLUS
        reason = draw(st.sampled_from(FAIL_REASONS)) if kind == "fail" else "err"
        events.append(_event(kind, t, rid, basis, reason))
        if kind in ("complete", "fail", "drop", "reject"):
            del live[rid]
        else:
            live[rid] = kind
    return events
