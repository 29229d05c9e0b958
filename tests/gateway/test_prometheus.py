"""The Prometheus sink counts exactly the trace's events."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Drop, Fail, Reject
from rvguard.gateway.prometheus import MetricsSink

from ._support import contract


def value(reg: CollectorRegistry, name: str, **labels: str) -> float | None:
    return reg.get_sample_value(name, labels)


def test_counts_by_tenant_basis_and_reason_and_credits_per_window() -> None:
    reg = CollectorRegistry()
    sink = MetricsSink(contract(), reg)
    events = [
        Arrive(0.1, "a", "assured"),
        Admit(0.1, "a", Basis.FLOOR),
        Dispatch(0.1, "a"),
        Arrive(0.2, "b", "assured"),
        Admit(0.2, "b", Basis.FLOOR),
        Arrive(0.3, "c", "assured"),
        Reject(0.3, "c", "excess"),
        Arrive(0.4, "d", "opportunistic"),
        Admit(0.4, "d", Basis.SURPLUS),
        Complete(0.6, "a"),
        Drop(0.7, "b", "doomed"),
        Fail(0.8, "d", "timeout"),
    ]
    for ev in events:
        sink(ev)
    assert value(reg, "rvguard_admitted_total", tenant="assured", basis="floor") == 2
    assert value(reg, "rvguard_rejected_total", tenant="assured", reason="excess") == 1
    assert value(reg, "rvguard_completed_total", tenant="assured", basis="floor") == 1
    assert value(reg, "rvguard_dropped_total", tenant="assured", basis="floor") == 1
    assert value(reg, "rvguard_failed_total", tenant="opportunistic", basis="surplus") == 1
    assert value(reg, "rvguard_sojourn_seconds_count", tenant="assured") == 1
    assert abs((value(reg, "rvguard_sojourn_seconds_sum", tenant="assured") or 0) - 0.5) < 1e-9
    assert value(reg, "rvguard_sojourn_seconds_count", tenant="opportunistic") is None
    assert value(reg, "rvguard_floor_credits_used", tenant="assured") == 0  # no ledger: not counted here
    sink(Arrive(1.2, "e", "opportunistic"))
    assert value(reg, "rvguard_window_index") == 1
    assert not sink._live or set(sink._live) == {"e"}


def test_the_reserve_and_slot_gauges_read_the_core_at_scrape_time() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from rvguard.contract import contract_from_mapping
    from rvguard.enforce.core import DecisionCore
    from rvguard.enforce.request import Request
    from rvguard.events import Proposal

    c = contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "service": {"s_max": 0.5},
            "tenants": {"a": {"floor": 4, "deadline": 2.0}},
        }
    )
    sink = MetricsSink(c, CollectorRegistry())
    core = DecisionCore(c)
    sink.watch_core(core)
    for i in range(3):
        core.arrive(Request(f"r{i}", "a", t=0.0), Proposal(), 0.0)
    text = generate_latest(sink.registry).decode()
    assert "rvguard_slots 2.0" in text and "rvguard_reserve_slots 0.0" in text
    assert "rvguard_in_flight 2.0" in text
    assert "rvguard_reserve_occupied 0.0" in text  # R = 0: no slot is reserved, so none is occupied


def test_the_headroom_events_and_the_sample_age_are_exported() -> None:
    from prometheus_client import CollectorRegistry
    from prometheus_client.parser import text_string_to_metric_families

    from rvguard.clock import ManualClock
    from rvguard.contract import contract_from_mapping
    from rvguard.enforce.dispatchers import MockDispatcher, Response
    from rvguard.enforce.guard import Guard
    from rvguard.events import Demote, Evict, Restore, Sample

    c = contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "service": {"s_max": 0.5},
            "tenants": {"a": {"floor": 4, "deadline": 2.0}},
        }
    )
    sink = MetricsSink(c, CollectorRegistry())
    clock = ManualClock()
    sink.watch_guard(Guard(c, MockDispatcher(lambda r: Response(text="")), clock=clock))
    for ev in (
        Sample(1.0, "kv_cache", 0.15, 0.9),
        Demote(1.0, "o1", "kv_cache", 0.9),
        Demote(1.0, "o2", "kv_cache", 0.9),
        Restore(2.0, "o1", "kv_cache", 1.9),
        Evict(2.5, "o3", 120, "emergency"),
    ):
        sink(ev)
    clock.advance(31.0)
    from prometheus_client import generate_latest

    fams = {f.name: f for f in text_string_to_metric_families(generate_latest(sink.registry).decode())}

    def value(name: str, **labels: str) -> float:
        return next(
            s.value for s in fams[name].samples if s.labels == labels and not s.name.endswith("_created")
        )

    assert value("rvguard_headroom", resource="kv_cache") == 0.15
    assert value("rvguard_demotions", resource="kv_cache") == 2.0
    assert value("rvguard_restores", resource="kv_cache") == 1.0
    assert value("rvguard_evictions", reason="emergency") == 1.0
    assert value("rvguard_headroom_sample_age_seconds", resource="kv_cache") == 30.0  # Guard clock 31 − 1
    assert value("rvguard_redline_firing") == 0.0 and value("rvguard_headroom_errors") == 0.0  # no redline
