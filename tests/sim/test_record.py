"""Run records and pooled conditions: the three denominators, ρ_eff, counted by hand on a small trace."""

from __future__ import annotations

import pytest

from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Reject
from rvguard.sim.record import Condition, RunRecord, record_run
from rvguard.sim.run import judge

from ._common import MARQUEE


def _trace() -> list:  # type: ignore[type-arg]
    """Three assured, all on the floor (a on time, b dropped, c late), and one opportunistic rejected."""
    return [
        Arrive(0.0, "a", "assured", 1.82, None, 16),
        Admit(0.0, "a", Basis.FLOOR),
        Dispatch(0.0, "a"),
        Arrive(0.1, "b", "assured", 0.1 + 1.82, None, 16),
        Admit(0.1, "b", Basis.FLOOR),
        Arrive(0.2, "o", "opportunistic", 0.2 + 1.82, None, 16),
        Reject(0.2, "o", "learner"),
        Dispatch(0.2, "b"),
        Complete(0.5, "a"),
        Arrive(0.6, "c", "assured", 0.6 + 1.82, None, 16),
        Admit(0.6, "c", Basis.FLOOR),
        Dispatch(0.6, "c"),
        Drop(2.1, "b", "doomed"),
        Complete(2.6, "c"),
    ]


def test_record_run_counts_by_hand() -> None:
    events = _trace()
    metrics, violations = judge(MARQUEE, events, ("AF", "SF", "WF"))
    r = record_run(MARQUEE, events, metrics, violations)
    assert (r.missed, r.judged) == (2, 3)  # b dropped, c late; a on time
    assert (r.unmet, r.offered) == (2, 3)
    assert (r.attained, r.entitled) == (1, 3)
    assert (r.admitted, r.rejected, r.drops, r.assured_drops) == (3, 0, 1, 1)
    assert r.span == 0.6
    assert r.service_n == 2 and r.service_sum == pytest.approx(0.5 + 2.0)
    assert r.service_max == pytest.approx(2.0) and r.sojourn_max == pytest.approx(2.0)
    assert r.wait_n == 3 and r.wait_sum == pytest.approx(0.1)


def test_condition_pools_runs_and_reports_rho_eff() -> None:
    runs = (
        RunRecord(missed=0, judged=10, unmet=2, offered=12, attained=10, entitled=10, admitted=10, span=2.0,
                  service_sum=4.0, service_n=10),
        RunRecord(missed=5, judged=10, unmet=5, offered=10, attained=5, entitled=10, admitted=10, span=2.0,
                  service_sum=6.0, service_n=10),
    )  # fmt: skip
    c = Condition({}, runs, {"slots": 4})
    assert c.assured_miss == 0.25 and c.offered_unmet == pytest.approx(7 / 22)
    assert c.floor_attainment == 0.75
    # ρ_eff per run: admitted rate 5/s × mean service (0.4, 0.6) / C, averaged
    assert c.rho_eff == pytest.approx((5 * 0.4 / 4 + 5 * 0.6 / 4) / 2)
    d = c.to_dict()
    lo, hi = d["floor_attainment_ci"]
    assert lo <= d["floor_attainment"] <= hi
    assert d["reps"] == 2 and d["runs_with_miss"] == 1
