"""Crafted traces for the review's tests: a small contract and a request builder."""

from __future__ import annotations

from rvguard.contract import Contract, contract_from_mapping
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Event


def contract(**service: object) -> Contract:
    """C = 2, W = 1 s; assured floor 2 (D 2 s), opportunistic unfloored (D 2 s)."""
    svc: dict[str, object] = {"s_max": 0.5, "s_max_opp": 0.6, "lower": 0.2}
    svc.update(service)
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "service": svc,
            "tenants": {
                "assured": {"floor": 2, "deadline": 2.0, "tier": 0},
                "opp": {"floor": 0, "deadline": 2.0, "tier": 1},
            },
        }
    )


def served(
    rid: str, t: float, service: float, *, tenant: str = "assured", wait: float = 0.0, max_tokens: int = 8
) -> list[Event]:
    """Arrive at ``t``, admitted, dispatched after ``wait``, completed ``service`` later."""
    basis = Basis.FLOOR if tenant == "assured" else Basis.SURPLUS
    d = t + wait
    return [
        Arrive(t, rid, tenant, max_tokens=max_tokens),
        Admit(t, rid, basis),
        Dispatch(d, rid),
        Complete(d + service, rid),
    ]


def dropped(rid: str, t: float, at: float, *, deadline: float, tenant: str = "opp") -> list[Event]:
    """Arrive at ``t`` with an absolute ``deadline``, dropped as doomed at ``at``."""
    return [Arrive(t, rid, tenant, deadline=deadline), Admit(t, rid, Basis.SURPLUS), Drop(at, rid, "doomed")]


def ordered(*groups: list[Event]) -> list[Event]:
    """The events of several requests in time order (stable: a request's own order is kept)."""
    return sorted((ev for g in groups for ev in g), key=lambda ev: ev.t)
