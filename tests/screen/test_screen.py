"""The screen's verdict: exact cases end to end, the dial, gating, flags and the label."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rvguard.contract import contract_from_mapping
from rvguard.errors import SpecError
from rvguard.screen import LABEL, ServiceDistribution, Workload, screen
from rvguard.screen.predict import dial_value, gated_rate


def _contract(slots: int = 4, floor: int = 6, deadline: float = 1.82, excess: str = "reject") -> object:
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": slots,
            "excess": excess,
            "service": {"s_max": 0.66},
            "tenants": {
                "assured": {"floor": floor, "deadline": deadline, "tier": 0},
                "opportunistic": {"floor": 0, "deadline": deadline, "tier": 1},
            },
        },
        source="test",
    )


def _svc(mean: float = 0.4, n: int = 4000) -> ServiceDistribution:
    u = (np.arange(n) + 0.5) / n
    return ServiceDistribution.of(-np.log1p(-u) * mean)


def _poisson_min(lam: float, b: int) -> float:
    """E[min(N, B)] by the plain pmf sum (independent of `gated_rate`'s log recursion)."""
    pmf = [math.exp(-lam) * lam**n / math.factorial(n) for n in range(b)]
    return sum(n * p for n, p in enumerate(pmf)) + b * (1 - sum(pmf))


@pytest.mark.parametrize(("lam", "b"), [(6.0, 6), (2.0, 6), (12.0, 4), (0.5, 1)])
def test_gated_rate(lam: float, b: int) -> None:
    assert gated_rate(lam, b, 1.0) == pytest.approx(_poisson_min(lam, b), rel=1e-12)
    assert gated_rate(lam, b, 2.0) == pytest.approx(_poisson_min(2 * lam, b) / 2, rel=1e-12)


def test_mm1_priority_end_to_end_equals_cobham_mean_wait() -> None:
    c = _contract(slots=1, floor=1000)
    svc = _svc(1.0)
    r = screen(c, Workload({"assured": 0.3, "opportunistic": 0.5}, svc, gating=False), percentile="mean")
    rho = 0.8 * svc.mean
    expected = rho * svc.mean * (1 + svc.scv) / 2 / (1 - 0.3 * svc.mean)  # Cobham M/G/1, top class
    assert r.tenants[0].mean_wait == pytest.approx(expected, rel=1e-9)


def test_the_dial_orders_predictions() -> None:
    c = _contract()
    w = Workload({"assured": 5.0, "opportunistic": 3.0}, _svc())
    p = [screen(c, w, percentile=d).tenants[0].p95 for d in ("p50", "mean", "p99")]
    assert p[0] < p[1] < p[2]
    assert dial_value(w.service, "p99") == w.service.percentile(99)
    for bad in ("p100", "median", "p0", "99"):
        with pytest.raises(SpecError, match="percentile"):
            screen(c, w, percentile=bad)


def test_priority_beats_fifo_and_fifo_overload_rejects() -> None:
    c = _contract()
    w = {"assured": 6.0, "opportunistic": 14.0}
    prio = screen(c, Workload(w, _svc()), percentile="mean")
    fifo = screen(c, Workload(w, _svc(), policy="fifo"), percentile="mean")
    assert math.isfinite(prio.tenants[0].p95)
    assert math.isinf(fifo.tenants[0].p95)
    assert not fifo.accept
    assert fifo.to_dict()["tenants"][0]["p95"] is None


def test_demote_adds_excess_to_the_lowest_tier() -> None:
    w = Workload({"assured": 9.0}, _svc())
    rej = screen(_contract(excess="reject"), w, percentile="mean")
    dem = screen(_contract(excess="demote"), w, percentile="mean")
    assert dem.rho_admitted == pytest.approx(9.0 * 0.4 * (_svc().mean / 0.4) / 4, rel=1e-9)
    assert rej.rho_admitted < dem.rho_admitted


def test_rho_flag_fires_at_095() -> None:
    c = _contract(floor=1000)
    svc = _svc(1.0)
    m = svc.mean
    at = screen(c, Workload({"assured": 0.95 * 4 / m}, svc, gating=False), percentile="mean")
    below = screen(c, Workload({"assured": 0.94 * 4 / m}, svc, gating=False), percentile="mean")
    assert at.rho_admitted == pytest.approx(0.95)
    assert "near-saturation" in {f.name for f in at.flags}
    assert "near-saturation" not in {f.name for f in below.flags}


def test_dispersion_and_sub_service_flags() -> None:
    tight = screen(_contract(deadline=0.5), Workload({"assured": 1.0}, _svc()), percentile="p50")
    names = {f.name for f in tight.flags}
    assert "high-dispersion" in names  # exponential: c_s² = 1
    assert "sub-service-deadline" in names  # p99 of Exp(0.4) ≈ 1.84 s > 0.5 s
    calm = ServiceDistribution.of([0.40, 0.41, 0.42, 0.43] * 10)
    ok = screen(_contract(), Workload({"assured": 1.0}, calm), percentile="p50")
    assert ok.flags == ()


@pytest.mark.parametrize("dial", ["p50", "mean", "p99"])
@pytest.mark.parametrize("load", [0.5, 6.0, 40.0])
def test_the_label_is_never_missing(dial: str, load: float) -> None:
    r = screen(_contract(), Workload({"assured": 6.0, "opportunistic": load}, _svc()), percentile=dial)
    assert LABEL in r.verdict
    d = r.to_dict()
    assert d["label"] == LABEL
    assert LABEL in d["verdict"]
    assert LABEL in d["caveat"]
    json.dumps(d, allow_nan=False)


def test_bad_workloads_are_spec_errors() -> None:
    c = _contract()
    with pytest.raises(SpecError, match="bogus"):
        screen(c, Workload({"bogus": 1.0}, _svc()))
    with pytest.raises(SpecError, match="finite"):
        screen(c, Workload({"assured": -1.0}, _svc()))
    with pytest.raises(SpecError, match="policy"):
        screen(c, Workload({"assured": 1.0}, _svc(), policy="lifo"))  # type: ignore[arg-type]
    none = contract_from_mapping(
        {"window": 1.0, "slots": 1, "service": {"s_max": 1.0}, "tenants": {"x": {"deadline": 1.0}}},
        source="t",
    )
    with pytest.raises(SpecError, match="floored"):
        screen(none, Workload({"x": 1.0}, _svc()))
