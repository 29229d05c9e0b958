"""DR and ND: doom-sound drops and doomed dispatches."""

from __future__ import annotations

import pytest

from rvguard.contract import Contract
from rvguard.errors import SpecError
from rvguard.events import Admit, Arrive, Basis, Dispatch, Drop
from rvguard.monitors import Monitor

from ._helpers import run


def test_dr_drop_with_t_plus_l_equal_to_d_is_not_doomed(marquee: Contract) -> None:
    # D = 1.82 (relative deadline), L = 0.236: a drop at t = D - L is not doomed
    t = 1.82 - 0.236
    events = [Arrive(0.0, "r", "opportunistic", deadline=t + 0.236), Admit(0.0, "r"), Drop(t, "r", "doomed?")]
    [v] = run(marquee, events).violations()
    assert v.property == "DR" and "not doomed" in v.detail


def test_dr_drop_of_a_doomed_request_is_fine(marquee: Contract) -> None:
    events = [Arrive(0.0, "r", "opportunistic"), Admit(0.0, "r"), Drop(1.6, "r", "doomed")]
    assert run(marquee, events).violations() == []


def test_nd_needs_an_upper_bound(marquee: Contract) -> None:
    with pytest.raises(SpecError, match="upper bound"):
        Monitor(marquee, ("ND",))


def test_nd_reports_a_dispatch_that_may_miss(two_tenants: Contract) -> None:
    events = [Arrive(0.0, "r", "gold"), Admit(0.0, "r", Basis.FLOOR), Dispatch(1.9, "r")]
    [v] = run(two_tenants, events, ("ND",)).violations()
    assert v.property == "ND" and v.t == 1.9
