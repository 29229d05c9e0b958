"""The gateway over two real vLLM CPU engines: one dies mid-stream, its greedy stream resumes on the other.

The client's text must be the uninterrupted run's (asked of the surviving engine directly),
and the trace must show one terminal event per request and no failure. The killed engine is
started again afterwards (the two engines serve the whole session).

Then the fleet end to end: two `rvguard serve` processes (replicas a and b, reject-all, floor
credits shared in a real Redis) over both engines, a real trace slice split between them, engine
e0 killed mid-run and restarted after.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from rvguard.check import check_traces
from rvguard.cli import main
from rvguard.gateway.app import Gateway, serving
from rvguard.gateway.config import KeysConfig
from rvguard.gateway.loadgen import replay, shots_from_trace
from rvguard.gateway.settings import GatewaySettings
from rvguard.io.public import FractionRule
from tests.conftest import SHARED_TRACES
from tests.gateway._support import (
    KEYS,
    SECRET,
    TERMINAL,
    auth,
    contract,
    read_trace,
    serve_process,
    terminal_counts,
)

TOKENS = 1500  # long enough that neither stream ends before the kill on an idle machine
BODY: dict[str, Any] = {
    "model": "tiny",
    "prompt": "A request arrives, is admitted",
    "max_tokens": TOKENS,
    "temperature": 0,
    "ignore_eos": True,
    "stream": True,
}


async def _text(client: httpx.AsyncClient, url: str, headers: dict[str, str], seen: list[int]) -> str:
    text = ""
    async with client.stream("POST", url + "/v1/completions", json=BODY, headers=headers) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                seen.append(1)
                text += "".join(c.get("text") or "" for c in json.loads(line[6:])["choices"])
    return text


def _engine_tokens(gw: Gateway) -> tuple[int, int] | None:
    """(engine index, output tokens it has sent the gateway) of the one relocatable stream in flight."""
    assert gw.fleet is not None
    names = [e.name for e in gw.fleet.engines]
    for _rid, engine, tokens in gw.fleet.relayed():
        return names.index(engine), tokens
    return None


async def _stop_mid_stream(gw: Gateway, engines: list[Any], stream: asyncio.Future[str]) -> Any | None:
    """Freeze (SIGSTOP) the engine the stream runs on once it has sent some tokens but not all.

    A CPU engine writes its tokens faster than the gateway, in the test's own event loop, reads
    them: killed when the gateway had seen its first tokens, it had often written all 1,500 into
    the socket already, and the stream ended whole with nothing to move. Frozen, it writes no
    more: let it run 20 ms at a time until the gateway has read what it wrote and has some (the
    same count at two looks 0.3 s apart).
    """
    while (got := _engine_tokens(gw)) is None:  # routed and dispatched
        assert not stream.done()
        await asyncio.sleep(0.002)
    doomed = engines[got[0]]
    doomed.signal(signal.SIGSTOP)
    last = None
    while True:
        await asyncio.sleep(0.3)  # the gateway reads what is in the socket
        got = _engine_tokens(gw)
        if got is None or stream.done():  # it had written every token before the freeze
            doomed.signal(signal.SIGCONT)
            return None
        assert got[1] < TOKENS, got
        if got[1] > 0 and got == last:
            # the same count twice, 0.3 s apart: the gateway has read what the frozen engine wrote (a
            # loop stalled 4 s once left the rest of the stream unread at the first look; read after
            # the kill, it finished the request, which then could not move)
            return doomed
        last = got
        if got[1] == 0:
            doomed.signal(signal.SIGCONT)
            await asyncio.sleep(0.02)
            doomed.signal(signal.SIGSTOP)


@pytest.mark.kills_engine
async def test_a_greedy_stream_resumes_on_the_other_engine(two_engines: Any, tmp_path: Path) -> None:
    """One greedy stream; the engine it runs on is killed mid-stream; it resumes on the other.

    One stream, not one per engine: two CPU engines on two cores starve each other (at stop 19 one
    engine generated 1,500 tokens while the other's stream got one chunk), so the engine that dies
    is whichever the stream was routed to, and the survivor is idle.
    """
    c = contract(slots=4, output_cap=TOKENS)
    s = GatewaySettings(
        upstream=tuple(f"e{i}={e.url}" for i, e in enumerate(two_engines)),
        keys=KeysConfig(keys=KEYS, claim_secret=SECRET),
        trace=tmp_path / "t.jsonl",
        # two idle engines tie on headroom, and P2C breaks the tie from this seed: 0 sends the stream
        # to e1 (3 sent it to e0), so the engine killed is the one the next test does not use, and it
        # restarts while that test runs (killing e0 made that test wait 28 s for its restart)
        route_seed=0,
        upstream_api_key=two_engines[0].key,  # the pool's engines run --api-key, one key
        probe_interval=0.5,
        # a busy engine's scrape can take seconds: a stale view would route siloed; this test is
        # about relocation, not routing
        staleness=60.0,
    )
    gw = Gateway(c, s)
    try:
        async with httpx.AsyncClient(timeout=300) as client:
            # greedy decoding agrees on both engines, and both are warm (a cold engine's first
            # request can take longer than the other's whole stream)
            reference = await _text(client, two_engines[1].url, two_engines[1].headers, [])
            assert await _text(client, two_engines[0].url, two_engines[0].headers, []) == reference
            async with serving(gw.app) as url:
                while gw.fleet is None or any(e.telemetry == "unknown" for e in gw.fleet.engines):
                    await asyncio.sleep(0.05)  # the first scrapes of /metrics (before: siloed routing)
                seen: list[int] = []
                stream = asyncio.ensure_future(_text(client, url, auth("sk-opp"), seen))
                doomed = await _stop_mid_stream(gw, two_engines, stream)
                if doomed is not None:
                    await asyncio.to_thread(doomed.kill)
                text = await stream
                relocated = gw.fleet.relocated
    finally:
        for e in two_engines:  # a killed one is started again by the next test that needs it
            if e.proc is not None and e.proc.poll() is None:
                e.signal(signal.SIGCONT)  # never leave one frozen
    assert len(reference) > 0 and text == reference
    if doomed is None:  # once in six runs (a clean clone at stop 20) the engine outran the freeze
        pytest.skip(f"the engine had written all {TOKENS} tokens before it was frozen: nothing to move")
    assert relocated == 1
    events = read_trace(tmp_path / "t.jsonl")
    assert set(terminal_counts(events).values()) == {1}
    assert [e["kind"] for e in events if e["kind"] in ("evict", "relocate")] == ["evict", "relocate"]
    assert not [e for e in events if e["kind"] == "fail"]


# --- The fleet end to end: two `rvguard serve` replicas, both engines, Redis, a real trace, a kill ---

CAP = 32  # tokens per request: every request CAP long, as the capacity below is measured
W = 2.0  # the credit window (s)
RUN = 20.0  # seconds of replayed trace: the kill at 8 s, then ten windows on the survivor
MAX_RATE = 12.0  # req/s offered at most (see below)
SLICE = SHARED_TRACES / "azure_conv_slice.csv"
FLEET_KEYS = {"assured": "sk-assured", "opportunistic": "sk-opp"}


async def _batch_time(engine: Any) -> float:
    """Seconds C concurrent CAP-token requests take on one engine: the fastest of 2 (a shared machine)."""
    body = {"model": engine.model, "prompt": "x", "max_tokens": CAP, "ignore_eos": True}
    best = float("inf")
    async with httpx.AsyncClient(timeout=120.0) as client:
        for _ in range(2):
            t0 = time.perf_counter()
            got = await asyncio.gather(
                *(
                    client.post(engine.url + "/v1/completions", json=body, headers=engine.headers)
                    for _ in range(engine.slots)
                )
            )
            assert all(r.status_code == 200 for r in got)
            best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.kills_engine(order=2)  # last: nothing after it waits for its engine's restart
async def test_two_replicas_over_two_engines_hold_the_floor_through_an_engine_kill(
    two_engines: Any, redis_url: str, tmp_path: Path
) -> None:
    """Trace replay over 2 replicas × 2 vLLM engines, reject-all, shared credits; engine e0 killed mid-run.

    B is set from the measured capacity of ONE engine (B/W ≈ half of it), so the surviving engine
    alone carries the whole floor. Judged by `rvguard check` on the merged traces and by a recount
    here from the raw records (importing neither the judge nor the pool).
    """
    a, b = two_engines
    batch = await _batch_time(b)
    per_engine = b.slots / batch  # req/s one engine sustains at CAP tokens (fastest burst: optimistic)
    # Offered: 1.5× the fleet's measured capacity, but at most MAX_RATE: above it the load generator and
    # the two replicas (2 cores shared with the engines) become the bottleneck, not the engines.
    rate = min(3 * per_engine, MAX_RATE)
    floor = max(2, round(0.15 * rate * W))  # B/W = half the assured rate (30%): the floor is the limit
    # D: generous against the measured batch time (0.08-0.16 s seen) because the 2 cores are shared
    # with other work: at the start of the load, before any kill, 32-token requests on a quiet engine
    # were seen to take 6 s and 8.6 s in stalls where nothing completed.
    deadline = max(15.0, 20 * batch)
    tenants_ = {
        "assured": {"floor": floor, "deadline": deadline, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    }
    service = {"s_max": deadline / 2, "s_max_opp": deadline / 2, "lower": 0.001, "upper": None}
    c = contract(window=W, slots=4, output_cap=CAP, tenants=tenants_, service=service)
    shots = shots_from_trace(
        SLICE,
        rate=rate,
        limit=max(20, int(rate * RUN)),
        tenant_rule=FractionRule(0.3, seed=7),
        output_cap=CAP,
        min_tokens=CAP,
        stream_every=3,
    )
    halves = [shots[0::2], shots[1::2]]  # alternate arrivals to replica a and b
    spec = tmp_path / "contract.json"
    spec.write_text(c.model_dump_json())
    common = ("--learner", "reject-all", "--credits", redis_url, "--share", "a=0.5", "--share", "b=0.5")
    common += ("--credit-timeout", "0.5", "--route-seed", "5", "--read-timeout", "30")
    common += ("--upstream", f"e1={b.url}")
    key = {"RVGUARD_UPSTREAM_API_KEY": a.key}  # both engines run --api-key, one key
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    t_start = time.perf_counter()
    try:
        with (
            serve_process(c, f"e0={a.url}", dirs[0], *common, "--replica", "a", env=key) as (url_a, trace_a),
            serve_process(c, f"e0={a.url}", dirs[1], *common, "--replica", "b", env=key) as (url_b, trace_b),
        ):
            for u in (url_a, url_b):
                assert httpx.get(u + "/healthz", timeout=5.0).status_code == 200, u
            await asyncio.sleep(3 * W)  # both replicas past their first window and first scrapes
            loads = [
                asyncio.ensure_future(replay(u, h, model=a.model, keys=FLEET_KEYS, timeout=120.0))
                for u, h in zip((url_a, url_b), halves, strict=True)
            ]
            await asyncio.sleep(0.4 * RUN)
            await _strand(a, url_a, url_b)  # e0 frozen holding a request: the kill strands something
            await asyncio.to_thread(a.kill)
            results = [r for got in await asyncio.gather(*loads) for r in got]
    finally:
        run_s = time.perf_counter() - t_start  # a dead `a` is started again by the next test needing it
    traces = [trace_a, trace_b]
    records = [json.loads(line) for t in traces for line in t.read_text().splitlines()[1:]]  # past the header
    print(f"\nbatch={batch:.2f}s per_engine={per_engine:.2f}/s B={floor}/{W}s D={deadline:.1f}s "
          f"rate={rate:.1f}/s shots={len(shots)} run={run_s:.0f}s")  # fmt: skip
    static, held = _judge_fleet(records, results, floor=floor)
    report = check_traces([str(t) for t in traces], c, properties=["AF", "WF"])
    assert report.fleet is not None and report.fleet.max_credits["assured"] <= floor
    # Redis slower than --credit-timeout (a busy machine): that replica spends its static share and
    # refuses the rest `floor-lowered` — declared AF violations, the only ones allowed.
    assert all(v.property == "AF" and "floor-lowered" in v.detail for v in report.violations), [
        (v.property, v.detail) for v in report.violations
    ]
    if not static:  # a pool's declared refusal is an attributed miss: exit 3 (no guard fault)
        code = main(["check", *map(str, traces), "--contract", str(spec), "--properties", "AF,WF"])
        assert code == (3 if held else 0)


async def _strand(engine: Any, *urls: str) -> None:
    """Return with ``engine`` (e0) frozen (SIGSTOP) while some replica has a request in flight on it,
    so that request cannot finish before the kill that follows. A request lasts ~0.1 s: e0 polled
    busy and then killed could have finished it in between (a clean clone saw nothing stranded);
    frozen, it may still finish from what it wrote before the freeze, which the replicas read a
    chunk a turn (twice, 0.2 s after the freeze, a replica still counted a request that then
    completed). So the replicas' count on e0 must be the same, and not 0, at two looks 0.5 s apart.
    Under the floor's light load (B = 4 a 2 s window, a request ~0.1 s, two engines) e0 is busy at few
    polls, and what it had sent before the freeze often ends the request (a clean clone saw every try
    end so): a frozen e0 is watched for `FROZEN_LOOKS` looks, in which a request dispatched to it after
    the freeze counts too (it cannot have had a byte of its answer)."""
    tries: list[list[int]] = []  # the counts seen after each freeze, for the failure's message
    async with httpx.AsyncClient(timeout=5.0) as client:
        for _ in range(100):
            if await _in_flight(client, urls):
                engine.signal(signal.SIGSTOP)
                seen: list[int] = []
                tries.append(seen)
                if await _held(client, urls, seen):
                    return
                engine.signal(signal.SIGCONT)
            await asyncio.sleep(0.05)
    raise AssertionError(
        f"e0 never held a request across a freeze (polled 100 times; counts after each freeze: {tries})"
    )


#: looks, 0.5 s apart, at a frozen e0's count of requests in flight (`_strand`)
FROZEN_LOOKS = 6


async def _held(client: httpx.AsyncClient, urls: tuple[str, ...], seen: list[int]) -> bool:
    """Whether, with e0 frozen, the replicas count the same requests on it, not 0, at two looks in a row."""
    for look in range(FROZEN_LOOKS):
        seen.append(await _in_flight(client, urls))
        if look and seen[-1] and seen[-1] == seen[-2]:
            return True
        await asyncio.sleep(0.5)  # what e0 sent before the freeze reaches the replicas
    return False


async def _in_flight(client: httpx.AsyncClient, urls: tuple[str, ...]) -> int:
    """How many requests the replicas count in flight on e0 (their /metrics)."""
    series = 'rvguard_engine_in_flight{engine="e0"} '
    texts = [(await client.get(u + "/metrics")).text for u in urls]
    return sum(int(float(x.split()[-1])) for t in texts for x in t.splitlines() if x.startswith(series))


def _judge_fleet(records: list[dict[str, Any]], results: list[Any], *, floor: int) -> tuple[int, int]:
    """The recount, from the raw records alone; returns how many assured arrivals met no pool (static)
    and how many entitled ones the pool refused, declared (held)."""
    arrive = {r["rid"]: r for r in records if r["kind"] == "arrive"}
    assert len(arrive) == len(results)
    statuses = Counter(r.status for r in results)
    assert set(statuses) <= {200, 429, 502}, statuses
    ends = Counter(r["rid"] for r in records if r["kind"] in TERMINAL)
    assert set(arrive) == set(ends) and set(ends.values()) == {1}  # exactly one terminal event each
    by_window: Counter[tuple[str, int]] = Counter()
    floored = set()
    for r in records:
        if r["kind"] == "admit" and r["basis"] == "floor":
            a = arrive[r["rid"]]
            by_window[a["tenant"], math.floor(a["t"] / W)] += 1
            floored.add(r["rid"])
    assert by_window and max(by_window.values()) <= floor, by_window  # ≤ B fleet-wide, every window
    # Entitled: an assured arrival the shared pool counted within B in its window (in the pool's order).
    assured = {rid: a for rid, a in arrive.items() if a["tenant"] == "assured"}
    shared = {rid for rid, a in assured.items() if a.get("credit") == "shared"}
    entitled = {rid for rid in shared if assured[rid]["pool_arrived"] <= floor}
    # Every entitled one admitted, but for those the pool itself refused, declared: while a replica
    # has not confirmed the window, the pool holds its reserve and answers `held`, and the decision
    # says so (floor_refused: pool-lowered). CI and 2 of 9 local runs saw one, each right after the
    # kill, with no stall and no store error traced (why the confirmation was late is not pinned).
    why = {r["rid"]: r.get("floor_refused") for r in records if r["kind"] == "reject"}
    held = {rid for rid in entitled - floored if why.get(rid) == "pool-lowered"}
    assert entitled and entitled - held == floored & shared, {rid: why.get(rid) for rid in entitled - floored}
    assert floored <= set(assured)  # reject-all: nothing admitted but on the floor
    rejected_assured = [rid for rid, a in arrive.items() if a["tenant"] == "assured" and rid not in floored]
    assert rejected_assured  # the floor really was the limit
    # On time: every entitled request completes by its deadline, except those stranded on the killed
    # engine (dispatched to it before it died): they were relocated or failed once.
    done = {r["rid"]: r["t"] for r in records if r["kind"] == "complete"}
    stranded = {r["rid"] for r in records if r["kind"] in ("relocate", "fail")}
    late = {rid for rid in entitled - held if done.get(rid, math.inf) > arrive[rid]["deadline"]}
    on_e0 = {r["rid"] for r in records if r["kind"] == "route" and r["engine"] == "e0"}
    static = len(assured) - len(shared)
    print(f"entitled={len(entitled)} rejected-assured={len(rejected_assured)} stranded={len(stranded)} "
          f"late={len(late)} max-credits={max(by_window.values())} static={static} "
          f"held={len(held)}")  # fmt: skip
    assert stranded <= on_e0 and stranded  # only the killed engine's requests moved or failed
    assert late <= stranded, late - stranded
    assert len(stranded) <= 2 * 4  # at most C_e in flight on e0 per replica at the kill
    return static, len(held)
