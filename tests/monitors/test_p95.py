"""The empirical P95 and its window bootstrap; online and offline agree on simulated traces."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rvguard.columnar import ColumnarTrace
from rvguard.monitors.offline import check_offline
from rvguard.monitors.p95 import SEED, sojourn_p95
from rvguard.sim.experiments import MARQUEE_CONTRACT, marquee_arrivals
from rvguard.sim.run import judge, run_once


def _nearest_rank(values: list[float], q: float = 0.95) -> float:
    xs = sorted(values)
    return xs[math.ceil(q * len(xs) - 1e-9) - 1]


def _naive_bootstrap(windows: list[int], sojourns: list[float], resamples: int) -> list[float]:
    """Resample windows explicitly (same draws as the module), pool, take the nearest rank."""
    keys = sorted(set(windows))
    k = len(keys)
    draws = np.random.default_rng(SEED).integers(0, k, size=(resamples, k))
    counts = [[int((row == j).sum()) for j in range(k)] for row in draws]
    by_window = {key: [s for w, s in zip(windows, sojourns, strict=True) if w == key] for key in keys}
    out = []
    for row in counts:
        pooled = [s for key, c in zip(keys, row, strict=True) for s in by_window[key] * c]
        out.append(_nearest_rank(pooled))
    return sorted(out)


pairs = st.lists(
    st.tuples(st.integers(0, 6), st.one_of(st.floats(0.01, 5.0), st.just(math.inf))), min_size=1, max_size=60
)


@settings(max_examples=150, deadline=None)
@given(pairs)
def test_point_and_interval_match_a_naive_bootstrap(data: list[tuple[int, float]]) -> None:
    w = [a for a, _ in data]
    s = [b for _, b in data]
    r = sojourn_p95(w, s, resamples=80)
    p = _nearest_rank(s)
    assert r.judged == len(s)
    assert r.not_completed == sum(math.isinf(x) for x in s)
    assert r.p95_unbounded == math.isinf(p)
    assert r.p95 == (None if math.isinf(p) else p)
    if len(set(w)) < 2:
        assert r.ci_low is None and r.ci_high is None
        return
    boot = _naive_bootstrap(w, s, 80)
    lo, hi = boot[math.ceil(0.025 * 80) - 1], boot[math.ceil(0.975 * 80) - 1]
    assert r.ci_low == (None if math.isinf(lo) else lo)
    assert r.ci_high_unbounded == math.isinf(hi)
    assert r.ci_high == (None if math.isinf(hi) else hi)


@settings(max_examples=50, deadline=None)
@given(pairs, st.randoms(use_true_random=False))
def test_order_does_not_matter(data: list[tuple[int, float]], rnd: object) -> None:
    shuffled = list(data)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a = sojourn_p95([x for x, _ in data], [y for _, y in data])
    b = sojourn_p95([x for x, _ in shuffled], [y for _, y in shuffled])
    assert a == b


def test_empty_sample() -> None:
    r = sojourn_p95([], [])
    assert (r.judged, r.p95, r.ci_low, r.resamples) == (0, None, None, 0)


@pytest.mark.parametrize(("mode", "opp"), [("guarded", 14.0), ("gated-fifo", 14.0), ("guarded", 2.0)])
def test_online_and_offline_agree_on_simulated_runs(mode: str, opp: float) -> None:
    arrivals = marquee_arrivals(MARQUEE_CONTRACT, 3, 0, opp_rate=opp)
    events = run_once(MARQUEE_CONTRACT, arrivals, mode=mode, seed=3).result.events
    cut = events[: len(events) * 2 // 3]  # a prefix: live requests past their deadline count as +inf
    for trace in (events, cut):
        online, _ = judge(MARQUEE_CONTRACT, trace)
        offline = check_offline(ColumnarTrace.from_events(list(trace)), MARQUEE_CONTRACT)
        assert online.assured_sojourn_p95 == offline.metrics.assured_sojourn_p95
        p = online.assured_sojourn_p95
        assert p.judged == online.admitted_judged
        assert p.windows >= 2
        if p.p95 is not None and p.ci_low is not None and p.ci_high is not None:
            assert p.ci_low <= p.ci_high


def test_check_reports_the_p95(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    from rvguard.cli import main
    from rvguard.io import TraceWriter

    path = Path(str(tmp_path)) / "run.jsonl"
    arrivals = marquee_arrivals(MARQUEE_CONTRACT, 1, 0)
    with TraceWriter(path) as w:
        for ev in run_once(MARQUEE_CONTRACT, arrivals, seed=1).result.events:
            w.write(ev)
    spec = Path(__file__).resolve().parents[2] / "specs" / "marquee.yaml"
    main(["check", str(path), "--contract", str(spec), "--json"])
    p = json.loads(capsys.readouterr().out)["metrics"]["assured_sojourn_p95"]
    assert p["judged"] > 0 and p["p95"] is not None and p["ci_low"] <= p["ci_high"]
    main(["check", str(path), "--contract", str(spec)])
    assert "assured P95 sojourn (s) [95 % CI]" in capsys.readouterr().out
