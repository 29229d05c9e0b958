"""One pass over a trace: requests, samples, demotions; orphans counted, never dropped silently."""

from __future__ import annotations

import math

from rvguard.events import Complete, Demote, Restore, Sample
from rvguard.review.records import collect

from ._traces import contract, ordered, served


def test_requests_samples_and_demotions_are_collected() -> None:
    events = ordered(
        served("a", 0.0, 0.3),
        served("o", 0.0, 0.2, tenant="opp", wait=1.0),
        [
            Sample(0.5, "kv_cache", 0.1, 0.4),
            Demote(0.5, "o", "kv_cache", 0.4),
            Restore(0.9, "o", "kv_cache", 0.8),
        ],
        [Complete(2.0, "ghost")],  # a rid that never arrived
    )
    summary = collect(events, contract())
    a, o = summary.requests["a"], summary.requests["o"]
    assert (a.basis, a.service, a.on_time, a.ceiling) == ("floor", 0.3, True, 0.5)
    assert (o.basis, o.dispatched, o.ceiling) == ("surplus", 1.0, 0.6)
    assert [(s.resource, s.value, s.sample_time, s.t) for s in summary.samples] == [
        ("kv_cache", 0.1, 0.4, 0.5)
    ]
    (d,) = summary.demotions
    assert (d.rid, d.t, d.restored) == ("o", 0.5, 0.9)
    assert summary.orphans == 1 and summary.events == len(events)
    assert (summary.first, summary.last) == (0.0, 2.0)


def test_an_unrestored_demotion_and_an_unfinished_request_stay_open() -> None:
    events = ordered(served("o", 0.0, 5.0, tenant="opp")[:3], [Demote(0.1, "x", "kv_cache", 0.0)])
    summary = collect(events, contract())
    assert summary.requests["o"].service is None and summary.requests["o"].outcome == ""
    assert math.isnan(summary.demotions[0].restored)
