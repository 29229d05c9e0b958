"""The gateway in front of several fake engines: P2C spreads, a stale view goes siloed, a dead engine.

Each engine is a `FakeUpstream` on 127.0.0.1 (with vLLM's /metrics where a test needs
headroom telemetry); the gateway runs in this process (`serving`). What is checked:
per-engine in flight never above C_e (the fake's own ``max_active``), the routing mode in
/metrics and the log, exactly one terminal event per request in the trace, and a relocated
stream equal to the uninterrupted one (the fake continues a prompt of ids as greedy decoding does).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from rvguard.check import check_trace
from rvguard.errors import SpecError
from rvguard.gateway.config import KeysConfig
from rvguard.gateway.fake import FakeUpstream
from rvguard.gateway.settings import GatewaySettings, engine_names

from ._support import KEYS, SECRET, auth, contract, gateway, read_trace, terminal_counts

N_TOKENS = 12
WHOLE = "".join(f"t{i} " for i in range(N_TOKENS))  # the fake's uninterrupted output


def _settings(ups: list[FakeUpstream], trace: Path | None, **over: Any) -> GatewaySettings:
    """Engines named e0, e1, ... in front of ``ups``."""
    engines = tuple(f"e{i}={u.url}" for i, u in enumerate(ups))
    keys = KeysConfig(keys=KEYS, claim_secret=SECRET)
    return GatewaySettings(upstream=engines, keys=keys, trace=trace, **over)


def _metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)"
    found = re.search(r"^" + pattern + "$", text, re.M)
    assert found, f"{name}{{{want}}} not in /metrics"
    return float(found.group(1))


async def _complete(client: httpx.AsyncClient, url: str, key: str, **body: Any) -> httpx.Response:
    payload = {"model": "fake", "prompt": "hello there", "max_tokens": N_TOKENS, **body}
    return await client.post(url + "/v1/completions", json=payload, headers=auth(key), timeout=30)


async def _stream_text(client: httpx.AsyncClient, url: str, key: str, seen: list[int] | None = None) -> str:
    """A streamed completion's text; ``seen`` gets one entry per chunk received."""
    import json

    body = {"model": "fake", "prompt": "hello there", "max_tokens": N_TOKENS, "stream": True}
    text = ""
    async with client.stream("POST", url + "/v1/completions", json=body, headers=auth(key)) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                if seen is not None:
                    seen.append(1)
                chunk = json.loads(line[6:])
                assert "token_ids" not in (chunk["choices"] or [{}])[0]  # the client did not ask
                text += "".join(c.get("text") or "" for c in chunk["choices"])
    return text


def test_engine_names_and_settings() -> None:
    assert engine_names(("http://127.0.0.1:9001", "b=http://127.0.0.1:9002")) == (
        ("127.0.0.1:9001", "http://127.0.0.1:9001"),
        ("b", "http://127.0.0.1:9002"),
    )
    with pytest.raises(SpecError, match="named twice"):
        engine_names(("http://127.0.0.1:9001", "http://127.0.0.1:9001/"))
    with pytest.raises(SpecError, match="names no engine"):
        GatewaySettings(upstream=("a=http://h:1", "b=http://h:2"), engine_slots={"c": 2})
    with pytest.raises(SpecError, match="slots"):
        GatewaySettings(upstream=("a=http://h:1", "b=http://h:2"), engine_slots={"a": 0})


async def test_p2c_spreads_load_within_each_engine_slots(tmp_path: Path) -> None:
    c = contract(slots=2)
    ups = [FakeUpstream(token_delay=0.01, metrics=True) for _ in range(3)]
    for up in ups:
        await up.start()
    s = _settings(
        ups,
        tmp_path / "t.jsonl",
        engine_slots={"e2": 1},
        route_seed=7,
        telemetry_interval=0.05,
    )
    try:
        async with gateway(c, s) as (gw, url), httpx.AsyncClient() as client:
            assert gw.guard.contract.slots == 5  # 2 + 2 + 1
            await asyncio.sleep(0.2)  # first scrapes
            answers = await asyncio.gather(*(_complete(client, url, "sk-opp") for _ in range(30)))
            assert all(a.status_code == 200 for a in answers)
            assert all(a.json()["choices"][0]["text"] == WHOLE for a in answers)
            metrics = (await client.get(url + "/metrics")).text
    finally:
        for up in ups:
            await up.close()
    assert all(u.served >= 3 for u in ups) and sum(u.served for u in ups) == 30
    assert all(u.max_active <= slots for u, slots in zip(ups, (2, 2, 1), strict=True))
    assert _metric(metrics, "rvguard_route_siloed") == 0.0
    assert _metric(metrics, "rvguard_routes_total", mode="p2c") == 30.0
    assert sum(_metric(metrics, "rvguard_engine_routed_total", engine=f"e{i}") for i in range(3)) == 30.0
    assert _metric(metrics, "rvguard_engine_slots", engine="e2") == 1.0
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts(events).values()) == {1}
    for before, ev in itertools.pairwise(events):  # each dispatch right after its route
        if ev["kind"] == "dispatch":
            assert before["kind"] == "route" and before["rid"] == ev["rid"] and before["mode"] == "p2c"
            assert ev["t"] - 2.0 <= before["view_time"] <= before["t"] == ev["t"]
            assert before["slots"] == {"e0": 2, "e1": 2, "e2": 1}[before["engine"]]
    routed = Counter(e["engine"] for e in events if e["kind"] == "route")
    assert [routed[f"e{i}"] for i in range(3)] == [u.served for u in ups]
    report = check_trace(str(tmp_path / "t.jsonl"), gw.guard.contract)  # judged with C = ΣC_e
    assert report.holds and "FR" in report.properties


async def test_stale_view_goes_siloed_and_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    c = contract(slots=2)
    ups = [FakeUpstream(token_delay=0.002, metrics=True) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(
        ups,
        None,
        route_seed=1,
        staleness=0.3,
        telemetry_interval=0.05,
    )
    caplog.set_level(logging.INFO, logger="rvguard.gateway")
    try:
        async with gateway(c, s) as (gw, url), httpx.AsyncClient() as client:
            assert gw.fleet is not None
            async with asyncio.timeout(10):  # the first scrapes (polled: a loaded machine is slow)
                while any(e.telemetry != "metrics" for e in gw.fleet.engines):
                    await asyncio.sleep(0.02)
            assert (await _complete(client, url, "sk-opp")).status_code == 200
            assert not gw.fleet.siloed
            ups[1].metrics_status = 503  # its telemetry fails: its view ages past 0.3 s
            await asyncio.sleep(0.6)
            for _ in range(4):
                assert (await _complete(client, url, "sk-opp")).status_code == 200
            metrics = (await client.get(url + "/metrics")).text
            assert gw.fleet.siloed and gw.fleet.siloed_reason == "stale"
            assert _metric(metrics, "rvguard_route_siloed") == 1.0
            assert _metric(metrics, "rvguard_route_siloed_reasons_total", reason="stale") == 4.0
            ups[1].metrics_status = 200
            async with asyncio.timeout(10):  # P2C again once a fresh scrape is in
                while gw.fleet.siloed:
                    await asyncio.sleep(0.05)
                    assert (await _complete(client, url, "sk-opp")).status_code == 200
    finally:
        for up in ups:
            await up.close()
    logged = [r.getMessage() for r in caplog.records]
    assert any("routing siloed (stale)" in m for m in logged)
    assert any("routing on P2C again" in m for m in logged)


async def test_engine_without_metrics_routes_on_free_slots(tmp_path: Path) -> None:
    c = contract(slots=1)
    ups = [FakeUpstream(token_delay=0.01) for _ in range(2)]  # /metrics answers 404
    for up in ups:
        await up.start()
    s = _settings(ups, None, route_seed=3)
    try:
        async with gateway(c, s) as (gw, url), httpx.AsyncClient() as client:
            answers = await asyncio.gather(*(_complete(client, url, "sk-opp") for _ in range(8)))
            assert gw.fleet is not None and {e.telemetry for e in gw.fleet.engines} == {"slots"}
    finally:
        for up in ups:
            await up.close()
    assert all(a.status_code == 200 for a in answers)
    assert [u.max_active for u in ups] == [1, 1] and [u.served for u in ups] == [4, 4]


async def test_engine_killed_mid_stream_relocates(tmp_path: Path) -> None:
    """Streams cut by an engine's death resume on the other: the client sees the whole output."""
    c = contract(slots=4)
    ups = [FakeUpstream(token_delay=0.02) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(ups, tmp_path / "t.jsonl", route_seed=5, probe_interval=0.1, relocations=6)
    try:
        async with gateway(c, s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            seen: list[list[int]] = [[] for _ in range(6)]
            streams = [asyncio.ensure_future(_stream_text(client, url, "sk-opp", seen[i])) for i in range(6)]
            while min(map(len, seen)) < 2:  # every stream is under way: the engines' ids have come
                await asyncio.sleep(0.01)
            assert ups[0].active and ups[1].active
            assert gw.fleet is not None
            relayed = gw.fleet.relayed()  # (rid, engine, tokens received) of each stream in flight
            assert len(relayed) == 6 and {e for _, e, _ in relayed} == {"e0", "e1"}
            assert all(n >= 1 for _, _, n in relayed)
            await ups[0].kill()
            texts = await asyncio.gather(*streams)
            assert gw.fleet.relayed() == []
            metrics = (await client.get(url + "/metrics")).text
            after = await _complete(client, url, "sk-opp")  # served by the live engine
            assert after.status_code == 200
    finally:
        for up in ups:
            await up.close()
    assert texts == [WHOLE] * 6
    assert _metric(metrics, "rvguard_engine_up", engine="e0") == 0.0
    assert _metric(metrics, "rvguard_relocations_total") >= 1.0
    moved = [b for b in ups[1].bodies if isinstance(b.get("prompt"), list)]
    assert moved and all(b["max_tokens"] < N_TOKENS for b in moved)  # the remaining budget only
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts(events).values()) == {1}
    assert {e["kind"] for e in events} >= {"complete"} and not any(e["kind"] == "fail" for e in events)
    moved = {e["rid"] for e in events if e["kind"] == "relocate"}
    assert len(moved) == _metric(metrics, "rvguard_relocations_total")
    for rid in moved:
        kinds = [e["kind"] for e in events if e.get("rid") == rid]
        assert kinds == [
            "arrive",
            "admit",
            "route",
            "dispatch",
            "evict",
            "relocate",
            "route",
            "dispatch",
            "complete",
        ]
        route = [e for e in events if e.get("rid") == rid and e["kind"] == "route"]
        assert (route[0]["engine"], route[1]["engine"]) == ("e0", "e1")
    assert check_trace(str(tmp_path / "t.jsonl"), c.model_copy(update={"slots": 8})).holds


async def test_engine_killed_chat_fails_once(tmp_path: Path) -> None:
    """A request that cannot move (chat) fails once with 502 when its engine dies under it."""
    c = contract(slots=2)
    ups = [FakeUpstream(token_delay=0.05) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(ups, tmp_path / "t.jsonl", route_seed=2)
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}
    try:
        async with gateway(c, s) as (_gw, url), httpx.AsyncClient(timeout=30) as client:
            calls = [
                asyncio.ensure_future(
                    client.post(url + "/v1/chat/completions", json=body, headers=auth("sk-opp"))
                )
                for _ in range(4)
            ]
            await asyncio.sleep(0.2)
            await ups[0].kill()
            answers = await asyncio.gather(*calls)
    finally:
        for up in ups:
            await up.close()
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(502) >= 1 and set(statuses) <= {200, 502}
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts(events).values()) == {1}
    fails = [e for e in events if e["kind"] == "fail"]
    assert len(fails) == statuses.count(502)


async def test_serve_process_with_two_upstreams(tmp_path: Path) -> None:
    """``rvguard serve SPEC --upstream A --upstream NAME=B --engine-slots NAME=1``, end to end."""
    from ._support import serve_process

    c = contract(slots=2)
    async with FakeUpstream(token_delay=0.01) as a, FakeUpstream(token_delay=0.01) as b:
        extra = ("--upstream", f"b={b.url}", "--engine-slots", "b=1", "--route-seed", "4")
        with serve_process(c, a.url, tmp_path, *extra) as (url, trace):
            async with httpx.AsyncClient(timeout=10.0) as client:
                answers = await asyncio.gather(*(_complete(client, url, "sk-opp") for _ in range(9)))
                metrics = (await client.get(url + "/metrics")).text
            await asyncio.sleep(0.05)
    assert all(x.status_code == 200 for x in answers)
    assert a.served + b.served == 9 and a.served and b.served and b.max_active == 1
    assert _metric(metrics, "rvguard_engine_slots", engine="b") == 1.0
    assert check_trace(str(trace), c.model_copy(update={"slots": 3})).holds  # C = ΣC_e = 2 + 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine-slots", "nothing"], "NAME=VALUE"),
        (["--engine-slots", "zz=2"], "names no engine"),
        (["--share", "0.5"], "--share needs --credits"),
        (["--credits", "redis://127.0.0.1:1/0"], "--replica"),
        (
            ["--credits", "redis://127.0.0.1:1/0", "--replica", "a", "--share", "0.7", "--share", "b=0.6"],
            "sum",
        ),
        (["--credits", "redis://u:pw@127.0.0.1:1/0", "--replica", "a"], "RVGUARD_REDIS_PASSWORD"),
        (
            [
                "--credits",
                "redis://127.0.0.1:1/0",
                "--replica",
                "a",
                "--credits-password-file",
                "/nonexistent",
            ],
            "--credits-password-file",
        ),
    ],
)
def test_serve_refuses_bad_fleet_options(tmp_path: Path, args: list[str], message: str, capsys: Any) -> None:
    import yaml

    from rvguard.cli import main

    from ._support import contract_data

    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(contract_data(contract())))
    code = main(["serve", str(spec), "--upstream", "http://127.0.0.1:9", "--port", "0", *args])
    assert code == 2 and message in capsys.readouterr().err


async def test_non_streamed_request_relocates_whole(tmp_path: Path) -> None:
    """A non-streamed completion whose engine dies is answered whole: text and usage of the full run."""
    c = contract(slots=2)
    ups = [FakeUpstream(token_delay=0.03) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(ups, tmp_path / "t.jsonl", route_seed=5, probe_interval=0.1, relocations=4)
    try:
        async with gateway(c, s) as (_gw, url), httpx.AsyncClient(timeout=30) as client:
            calls = [asyncio.ensure_future(_complete(client, url, "sk-opp")) for _ in range(2)]
            while not (ups[0].active and ups[1].active):
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # a few tokens each
            await ups[0].kill()
            answers = await asyncio.gather(*calls)
    finally:
        for up in ups:
            await up.close()
    for a in answers:
        assert a.status_code == 200
        choice = a.json()["choices"][0]
        assert choice["text"] == WHOLE and "token_ids" not in choice and "prompt_token_ids" not in choice
        assert a.json()["usage"]["completion_tokens"] == N_TOKENS
    assert any(isinstance(b.get("prompt"), list) for b in ups[1].bodies)  # one of them moved


async def test_relocations_are_bounded_by_k(tmp_path: Path) -> None:
    """k = 1: of two streams on a dying engine, one resumes elsewhere, the other fails once."""
    c = contract(slots=2)
    ups = [FakeUpstream(token_delay=0.05) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(ups, tmp_path / "t.jsonl", route_seed=5, relocations=1)
    try:
        async with gateway(c, s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            seen: list[list[int]] = [[] for _ in range(4)]
            streams = [asyncio.ensure_future(_stream_text(client, url, "sk-opp", seen[i])) for i in range(4)]
            while min(map(len, seen)) < 2:
                await asyncio.sleep(0.01)
            assert ups[0].active == ups[1].active == 2  # free-slot routing: two on each
            await ups[0].kill()
            done = await asyncio.gather(*streams, return_exceptions=True)
            assert gw.fleet is not None
            stats = gw.fleet.statistics()
    finally:
        for up in ups:
            await up.close()
    assert (stats.relocated, stats.relocation_refused) == (1, 1)
    assert sum(text == WHOLE for text in done) == 3  # the moved one came whole, after a slot freed
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts(events).values()) == {1}
    assert len([e for e in events if e["kind"] == "fail"]) == 1


async def test_an_engine_slow_to_answer_one_probe_stays_in_rotation(tmp_path: Path) -> None:
    """One probe past PROBE_S is a busy engine, not a dead one: it stays in rotation and the count
    of misses starts again at its next answer (at stop 19 one miss stranded a relocated stream)."""
    c = contract(slots=2)
    ups = [FakeUpstream(token_delay=0.02) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(ups, None, route_seed=5, probe_interval=0.2)
    try:
        async with gateway(c, s) as (gw, _url):
            assert gw.fleet is not None
            e0 = gw.fleet.engines[0]
            ups[0].pause()
            missed = False
            async with asyncio.timeout(10):
                while not missed:  # the probe in flight at the pause times out (1.5 s)
                    assert e0.alive
                    missed = e0.probe_misses >= 1
                    await asyncio.sleep(0.02)
            ups[0].resume()
            async with asyncio.timeout(5):
                while e0.probe_misses:  # the next probe answers
                    assert e0.alive
                    await asyncio.sleep(0.02)
            assert e0.alive and e0.failures == 0
    finally:
        for up in ups:
            await up.close()


async def test_a_hung_engine_leaves_rotation_and_its_requests_fail_once(tmp_path: Path) -> None:
    """A paused engine: three probes in a row time out (out of rotation), its requests end at the read
    time-out."""
    c = contract(slots=2)
    ups = [FakeUpstream(token_delay=0.02) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(ups, tmp_path / "t.jsonl", route_seed=5, probe_interval=0.2, read_timeout=1.0)
    try:
        async with gateway(c, s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            first = [asyncio.ensure_future(_complete(client, url, "sk-opp")) for _ in range(2)]
            while not (ups[0].active and ups[1].active):
                await asyncio.sleep(0.01)
            ups[0].pause()
            answers = await asyncio.gather(*first)
            assert gw.fleet is not None
            async with asyncio.timeout(15):
                while gw.fleet.engines[0].alive:  # three probes in a row time out (1.5 s each)
                    await asyncio.sleep(0.05)
            after = await asyncio.gather(*(_complete(client, url, "sk-opp") for _ in range(3)))
            ups[0].resume()
    finally:
        for up in ups:
            await up.close()
    assert sorted(a.status_code for a in answers) == [200, 504]
    assert all(a.status_code == 200 for a in after) and ups[1].served == 4
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts(events).values()) == {1}
    assert [e["reason"] for e in events if e["kind"] == "fail"] == [
        "DispatchError: upstream timeout: ReadTimeout"
    ]


def test_serve_takes_the_contract_fleet_block_as_defaults_and_flags_override(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The block's staleness and the served engines' C_e are the defaults; a flag wins; others C."""
    from argparse import Namespace

    from rvguard.contract import contract_from_mapping
    from rvguard.gateway.cli import _fleet_slots, _staleness

    base = {
        "window": 1,
        "slots": 4,
        "service": {"s_max": 0.5, "lower": 0.1},
        "tenants": {"a": {"floor": 1, "deadline": 1}},
    }
    block = contract_from_mapping({**base, "fleet": {"staleness": 0.75, "engines": {"e0": 2, "e9": 3}}})
    ups = ["e0=http://127.0.0.1:1", "e1=http://127.0.0.1:2"]
    bare = Namespace(upstream=ups, engine_slots=[], staleness=None)
    with caplog.at_level(logging.WARNING, logger="rvguard.gateway"):
        assert _staleness(block, bare) == 0.75 and _fleet_slots(block, bare) == {"e0": 2}  # e9 serves nothing
    assert [r.getMessage() for r in caplog.records if "e9" in r.getMessage()]  # said, not silently ignored
    flags = Namespace(upstream=ups, engine_slots=["e0=1", "e1=5"], staleness=0.5)
    assert _staleness(block, flags) == 0.5 and _fleet_slots(block, flags) == {"e0": 1, "e1": 5}
    plain = contract_from_mapping(base)
    assert _staleness(plain, bare) == 2.0 and _fleet_slots(plain, bare) == {}


async def test_a_dispatch_that_waits_for_a_slot_is_routed_late_and_traced(tmp_path: Path) -> None:
    """e0 out of rotation, C = 2 over two engines of C_e = 1: the second dispatch waits for e1's slot,
    and its route record follows its dispatch record; FR judges it (one in flight on e1 at a time)."""
    c = contract(slots=1)
    ups = [FakeUpstream(token_delay=0.02) for _ in range(2)]
    for up in ups:
        await up.start()
    s = _settings(ups, tmp_path / "t.jsonl", route_seed=3, probe_interval=0.1)
    try:
        async with gateway(c, s) as (gw, url), httpx.AsyncClient(timeout=30) as client:
            assert gw.guard.contract.slots == 2 and gw.fleet is not None
            await ups[0].kill()
            async with asyncio.timeout(10):
                while gw.fleet.engines[0].alive:  # a refused probe takes it out at once
                    await asyncio.sleep(0.02)
            answers = await asyncio.gather(*(_complete(client, url, "sk-opp") for _ in range(2)))
            late = gw.fleet.late_routes
    finally:
        for up in ups:
            await up.close()
    assert [a.status_code for a in answers] == [200, 200] and ups[1].served == 2 and ups[1].max_active == 1
    assert late == 1
    events = read_trace(tmp_path / "t.jsonl")
    kinds = {
        r: [e["kind"] for e in events if e.get("rid") == r] for r in {e.get("rid") for e in events} - {None}
    }
    assert sorted(k[2:4] for k in kinds.values()) == [["dispatch", "route"], ["route", "dispatch"]]
    assert all(e["engine"] == "e1" for e in events if e["kind"] == "route")
    report = check_trace(str(tmp_path / "t.jsonl"), gw.guard.contract)
    assert report.holds and "FR" in report.properties


async def test_a_relayed_stream_counts_the_whole_output_across_a_move() -> None:
    """The relay of a relocatable request tells its caller's `Stream` one stream: the chunks, and
    the tokens generated so far counted across engines (the next engine's own count restarts)."""
    import json

    from rvguard.enforce.dispatchers import Stream
    from rvguard.fleet.relocate import Progress
    from rvguard.gateway.fleet import _Relay

    chunks: list[str] = []
    counts: list[int] = []
    relay = _Relay(Progress(), Stream(lambda data, usage: chunks.append(data), counts.append), keep_ids=False)

    async def render(ids: list[int]) -> str:
        return "".join(f"t{i} " for i in ids)

    relay.render = render
    first = {"id": "x", "choices": [{"text": "t1 ", "token_ids": [1], "prompt_token_ids": [9]}]}
    relay.stream.chunk(json.dumps(first), False)  # the first engine, as its dispatch tells it
    relay.stream.chunk(json.dumps({"choices": [{"text": "t2 ", "token_ids": [2]}]}), False)
    relay.progress.moved()
    relay.stream.chunk(json.dumps({"choices": [{"text": "garbled", "token_ids": [3]}]}), False)
    await relay.drain()
    assert counts == [1, 2, 3]
    assert [json.loads(c)["choices"][0]["text"] for c in chunks] == ["t1 ", "t2 ", "t3 "]
