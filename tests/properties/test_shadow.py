"""A user's table beside a running Guard: its shield in shadow, each disagreement an alert."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import jsonschema

from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.request import Request
from rvguard.enforce.watch import Alert, WatchConfig
from rvguard.events import Event, event_to_dict
from rvguard.properties import BUILTIN, TableMonitor
from rvguard.properties.load import load_properties
from tests.enforce._harness import make_contract

ROOT = Path(__file__).resolve().parents[2]
(CONCURRENCY,) = load_properties(ROOT / "examples" / "properties" / "tenant_concurrency.yaml")


async def _run(tables: list, n: int) -> tuple[Guard, list[Event], list[Alert]]:
    contract = make_contract(slots=4, floor=10, lower=0.0)
    release = asyncio.Event()

    async def handler(request: Request) -> Response:
        await release.wait()
        return Response()

    trace: list[Event] = []
    hooked: list[Alert] = []
    watch = WatchConfig(on_alert=hooked.append)
    async with Guard(
        contract,
        MockDispatcher(handler),
        sinks=[trace.append],
        config=GuardConfig(properties=tables, shadow=True, watch=watch),
    ) as g:
        tasks = [asyncio.create_task(g.submit(Request(f"r{i}", "assured", 0.0))) for i in range(n)]
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*tasks)
    return g, trace, [a for a in hooked if a.kind == "shield"]


def test_a_compliant_run_raises_no_alert() -> None:
    guard, trace, hooked = asyncio.run(_run([CONCURRENCY, BUILTIN["AF"], BUILTIN["CAP"]], 2))
    assert guard.shield is not None and guard.shield.alerts == [] and hooked == []
    assert len(trace) == 2 * 4  # arrive, admit, dispatch, complete


def test_a_disagreement_is_an_alert_never_silent() -> None:
    """Three requests of one tenant run at once; the table allows two: the third dispatch is what
    the shield would delay, alerted at that event, and the monitor of the same table agrees."""
    guard, trace, hooked = asyncio.run(_run([CONCURRENCY], 3))
    assert guard.shield is not None
    (alert,) = guard.shield.alerts
    assert alert == hooked[0]
    assert "would replace admit of r2" in alert.detail and "running + 1 <= k" in alert.detail
    (record,) = [ev for ev in trace if ev.kind.value == "alert"]
    assert (record.t, record.condition, record.extra["detail"]) == (alert.t, "shield", alert.detail)  # type: ignore[attr-defined]
    (v,) = TableMonitor(guard.contract, [CONCURRENCY]).feed_all(trace)
    assert (v.rid, v.t, v.property) == ("r2", alert.t, "TENANT_CONCURRENCY")
    _assert_declared(event_to_dict(record))


def _assert_declared(rec: dict) -> None:
    """The record validates against specs/trace.schema.json and each of its fields is one the
    schema's alert branch declares (the schema allows unknown fields, so validation alone would
    pass an undocumented one)."""
    schema = json.loads((ROOT / "specs" / "trace.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(rec)
    (branch,) = [b for b in schema["allOf"] if b["if"]["properties"]["kind"].get("const") == "alert"]
    declared = {"t", "kind"} | set(branch["then"]["properties"])
    assert set(rec) <= declared, set(rec) - declared


def test_no_tables_no_shield() -> None:
    guard = Guard(make_contract(), MockDispatcher(lambda r: Response()))  # type: ignore[arg-type,return-value]
    assert guard.shield is None


def test_the_gateway_passes_its_tables_to_the_guard() -> None:
    """``rvguard serve --property FILE [--shadow]`` sets GatewaySettings.properties (and .shadow); the
    Gateway's Guard enforces them through its core's gate, or shields them in shadow."""
    import argparse

    from rvguard.enforce.gate import Gate
    from rvguard.gateway.app import Gateway, GatewaySettings
    from rvguard.gateway.cli import _add_serve, _properties
    from tests.gateway._support import contract

    p = argparse.ArgumentParser()
    _add_serve(p)
    path = str(ROOT / "examples" / "properties" / "tenant_concurrency.yaml")
    for flags, shadow in (([], False), (["--shadow"], True)):
        args = p.parse_args(["spec.yaml", "--upstream", "http://127.0.0.1:9", "--property", path, *flags])
        got = _properties(args)
        assert got["shadow"] is shadow and [t.name for t in got["properties"]] == ["TENANT_CONCURRENCY"]
        g = Gateway(contract(), GatewaySettings(upstream="http://127.0.0.1:9", **got))
        hook = g.guard.shield
        assert hook is not None and hook.shield.product.tables[-1].name == "TENANT_CONCURRENCY"
        assert isinstance(hook, Gate) is not shadow and (g.guard.core.gate is hook) is not shadow
    assert Gateway(contract(), GatewaySettings(upstream="http://127.0.0.1:9")).guard.shield is None
