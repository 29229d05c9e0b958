"""The online Monitor: time order, unknown tenants, bounded memory."""

from __future__ import annotations

import pytest

from rvguard.contract import Contract
from rvguard.errors import TraceOrderError, UnknownTenantError
from rvguard.events import Arrive
from rvguard.monitors import Monitor

from ._helpers import served


def test_out_of_order_time_raises_and_changes_nothing(marquee: Contract) -> None:
    m = Monitor(marquee)
    m.feed(Arrive(1.0, "a", "assured"))
    with pytest.raises(TraceOrderError):
        m.feed(Arrive(0.5, "b", "assured"))
    assert m.statistics().live_requests == 1 and m.now == 1.0


def test_unknown_tenant_raises(marquee: Contract) -> None:
    with pytest.raises(UnknownTenantError, match="'nobody'"):
        Monitor(marquee).feed(Arrive(0.0, "a", "nobody"))


def test_memory_is_bounded_by_live_requests(marquee: Contract) -> None:
    m = Monitor(marquee, retain_finished=10)
    for i in range(2000):
        m.feed_all(served(f"r{i}", i * 0.2, i * 0.2 + 0.1, tenant="opportunistic"))
    s = m.statistics()
    assert s.live_requests == 0 and s.retained_finished == 10 and s.pending_timers == 0
