"""Small trace builders shared by the per-property monitor tests."""

from __future__ import annotations

from rvguard.contract import Contract
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event
from rvguard.monitors import Monitor


def run(
    contract: Contract, events: list[Event], props: tuple[str, ...] = ("AF", "SF", "DR", "WF")
) -> Monitor:
    """A monitor that has consumed ``events``."""
    m = Monitor(contract, props)
    m.feed_all(events)
    return m


def served(rid: str, t: float, done: float, tenant: str = "assured") -> list[Event]:
    """One request admitted on the floor at ``t``, dispatched at once, completed at ``done``."""
    return [Arrive(t, rid, tenant), Admit(t, rid, Basis.FLOOR), Dispatch(t, rid), Complete(done, rid)]
