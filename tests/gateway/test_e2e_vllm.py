"""End to end on a real engine: gateway + vLLM CPU + an open-loop replay of a real trace slice.

The engine comes from the session fixture `engine` (conftest): one server for
the session, in its own process group. Every test here fails — never skips —
when the engine cannot be installed or started. Loops are bounded: a finite
schedule, per-request timeouts, bounded polls.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from rvguard.check import check_trace
from rvguard.clock import MonotonicClock
from rvguard.contract import Entitlement
from rvguard.gateway.calibrate import calibrate
from rvguard.gateway.config import KeysConfig
from rvguard.gateway.loadgen import Result, replay, shots_from_trace
from rvguard.io.public import FractionRule

from ..conftest import SHARED_TRACES
from ._support import KEYS as _KEYS
from ._support import (
    SECRET,
    auth,
    contract,
    gateway,
    identity_attempts,
    max_queue,
    read_trace,
    serve_process,
    settings,
    stream_then_leave,
    tenants,
    terminal_counts,
)
from .conftest import Engine

KEYS = {"assured": "sk-assured", "opportunistic": "sk-opp"}
# N: at 2.5x capacity the direct side's assured miss is about 0.9 (asserted >= 0.3) with 200 requests as
# with 300; each fewer request is a fraction of a second less of `make test`
N, CAP = 200, 96
OVERLOAD = 2.5  # offered rate / the engine's measured capacity at CAP tokens
SLICE = SHARED_TRACES / "azure_conv_slice.csv"


async def _poll(cond: object, seconds: float = 10.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if cond():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return False


async def _capacity(engine: Engine) -> float:
    """Requests/s the engine sustains at CAP tokens: C concurrent requests timed, the fastest of 3.

    The load is set from this, not from a constant: at a fixed 40 req/s a faster machine saw
    1.3× overload instead of 1.7×, the queue barely grew, and the direct side's miss fell to 0.2.
    """
    body = {"model": engine.model, "prompt": "x", "max_tokens": CAP, "ignore_eos": True}
    best = float("inf")
    async with httpx.AsyncClient(timeout=60.0) as client:
        for _ in range(3):
            t0 = time.perf_counter()
            answers = await asyncio.gather(
                *(
                    client.post(engine.url + "/v1/completions", json=body, headers=engine.headers)
                    for _ in range(engine.slots)
                )
            )
            assert all(a.status_code == 200 for a in answers)
            best = min(best, time.perf_counter() - t0)
    return engine.slots / best


def _miss(results: list[Result], deadline: float) -> float:
    """Share of requests not answered (200) within the deadline: an error is a miss too."""
    return sum(r.status != 200 or r.latency > deadline for r in results) / len(results)


def _miss_net(results: list[Result], deadline: float) -> float:
    """As `_miss`, on the client's clock less its own queueing and reading: from when its request's
    headers began to be written to when the answer's last bytes reached its kernel."""
    late = [
        r.status != 200 or r.wrote is None or r.landed is None or r.landed - r.wrote > deadline
        for r in results
    ]
    return sum(late) / len(results)


async def test_floor_holds_under_overload_and_direct_shows_what_it_prevented(
    engine: Engine, tmp_path: Path
) -> None:
    """``rvguard serve`` (own process) + vLLM + a real trace slice at 2.5× capacity; RejectAssured."""
    c = contract(output_cap=CAP)
    deadline = c.tenants["assured"].deadline
    rate = OVERLOAD * await _capacity(engine)
    shots = shots_from_trace(
        SLICE,
        rate=rate,
        limit=N,
        tenant_rule=FractionRule(0.3, seed=7),
        output_cap=CAP,
        min_tokens=CAP,  # every request CAP tokens long: the capacity measured above is the one offered
        stream_every=5,
    )
    learner = "tests.gateway._support:RejectAssured"
    # The learner's verdict is the variable here, not its speed: at the default 0.1 s a busy CI
    # machine once let a RejectAssured answer overrun, which rejects the surplus (learner-timeout).
    args = ("--learner", learner, "--learner-timeout", "10", "--read-timeout", "60")
    key = {"RVGUARD_UPSTREAM_API_KEY": engine.key}  # the engine runs --api-key; never on the command line
    with serve_process(c, engine.url, tmp_path, *args, env=key) as (url, trace):
        clock = _FirstRead.unix_anchored()
        guarded = await replay(url, shots, model=engine.model, keys=KEYS, timeout=120.0, clock=clock)
    direct_keys = dict.fromkeys(KEYS, engine.key)
    direct = await replay(engine.url, shots, model=engine.model, keys=direct_keys, timeout=120.0)

    # No request lost: every shot answered, every arrival has exactly one terminal event.
    lost = [
        (i, r.shot.stream, round(r.sent, 3), round(r.latency, 3), r.error)
        for i, r in enumerate(guarded)
        if r.status not in (200, 429)
    ]
    assert not lost, lost  # (shot, streamed, sent at, after s, error)
    events = read_trace(trace)
    counts = terminal_counts(events)
    assert len(counts) == N and set(counts.values()) == {1}
    report = check_trace(str(trace), c, properties=["AF", "DR", "WF"])
    assert report.violations == []
    # Every entitled request admitted on the floor, whatever the learner said (checked independently).
    ent = Entitlement(c)
    entitled = {e["rid"] for e in events if e["kind"] == "arrive" and ent.arrive(e["tenant"], e["t"])[1]}
    floor = {e["rid"] for e in events if e["kind"] == "admit" and e["basis"] == "floor"}
    assert entitled and entitled == floor
    assert all(r.shot.tenant == "assured" for r in guarded if r.status == 429)
    assert any(r.status == 429 for r in guarded)
    assert max_queue(events) > c.slots  # the slots really were overloaded
    # What the floor prevented: the same entitled requests, sent straight to the engine (FIFO).
    by_rid = {r.rid: i for i, r in enumerate(guarded)}
    g_ent = [guarded[by_rid[rid]] for rid in entitled]
    d_ent = [direct[by_rid[rid]] for rid in entitled]
    # Straight to an overloaded engine some requests may time out or be refused: they count as misses,
    # but most must be answered for the comparison to mean anything.
    answered = sum(r.status == 200 for r in direct)
    assert answered >= 0.8 * len(direct), [(r.status, r.error) for r in direct if r.status != 200][:5]
    g_miss, d_miss = _miss(g_ent, deadline), _miss(d_ent, deadline)
    done = {e["rid"]: e["t"] for e in events if e["kind"] == "complete"}
    due = {e["rid"]: e["deadline"] for e in events if e["kind"] == "arrive"}
    late = sum(done.get(rid, float("inf")) > due[rid] for rid in entitled)  # the gateway's own view (SF)
    d_all = _miss([d for d in direct if d.shot.tenant == "assured"], deadline)
    assert clock.first is not None
    zero = clock.first - read_origin(trace)
    gap, parts = _clocks_side_by_side(events, {rid: guarded[by_rid[rid]] for rid in entitled}, zero)
    g_net = _miss_net(g_ent, deadline)
    split = "; ".join(f"{name}: {_median_ms(xs)}" for name, xs in parts.items())
    print(f"\nrate={rate:.1f}/s entitled={len(entitled)} miss: guarded by the client {g_miss:.3f} "
          f"(less its own queueing and reading {g_net:.3f}), by the trace {late / len(entitled):.3f} "
          f"(largest recorded gap {gap * 1e3:.1f} ms); client minus trace: {split}; "
          f"direct {d_miss:.3f} (all assured {d_all:.3f})")  # fmt: skip
    # The guarded side is judged on the gateway's own trace (its clock, as SF is): the client's view
    # also holds the client's and the gateway's CPU waits on 2 cores shared with the engine, which
    # made the client-measured guarded miss swing between 0.0 and 0.45 from run to run.
    # The engine alone was overwhelmed: judged on every assured request (≈ 90), not on the ≈ 10
    # entitled ones, whose miss fraction is too noisy to hold to a threshold.
    assert d_all >= 0.3, d_all
    assert late / len(entitled) < d_miss  # the floor's own requests: fewer late through the guard


class _FirstRead(MonotonicClock):
    """A Unix-anchored monotonic clock that remembers its first reading (the replay's 0)."""

    first: float | None = None

    def now(self) -> float:
        t = super().now()
        self.first = t if self.first is None else self.first
        return t


def _clocks_side_by_side(
    events: list[dict[str, Any]], answered: dict[str, Result], client_zero: float
) -> tuple[float, dict[str, list[float]]]:
    """The trace's clock against the client's for each answered entitled request. The gateway dates
    the arrival back by the recorded gap to when the request's bytes reached its kernel
    (`rvguard.gateway.server.kernel_wait`), so its view of a request (completion - arrival + gap)
    should never be longer than the client's from when it began writing its headers (``wrote``) to
    when it had read the answer (``done``), two readings of the client's own clock: a longer trace
    makes SF harsher than the client. Asserted for the median request (to 2 ms, the two clocks'
    rounding): stamps wrong for every request (a completion stamped after the answer left, arrivals
    dated back too far) fail it. Not asserted per request: under `make test` one request in each of
    two runs (2026-12-07, a CI run and a clean clone) came out 195 ms and 160 ms longer than the
    client's view, the client's stamps around it in order; the gap rests on the kernel's age of the
    received bytes (``tcpi_last_data_recv``, counted in ticks), and which reading was off is not
    pinned. Reported instead: ``over`` (the trace's view less the client's, per request).

    ``client_zero`` is the client's 0 on the trace's time line (both clocks are monotonic from
    Unix time; the trace's header has its origin), which splits what the client saw beyond the
    trace in four: its own queueing before it began writing its headers (``wrote - sent``: its
    event loop and CPU, no server's to see), from then to the dated arrival (about 0), from the
    completion's stamp to when the answer's last bytes reached the client's kernel (the gateway
    writing late), and from then to the client's reading them (its own loop again); ``excess`` is
    the trace's view less the client's without its reading (``landed - wrote``), which rests on the
    kernel's ages on both sides. Returns the largest recorded gap and the sorted parts."""
    arrive = {e["rid"]: e for e in events if e["kind"] == "arrive"}
    done = {e["rid"]: e["t"] for e in events if e["kind"] == "complete"}
    gaps: list[float] = [0.0]
    parts: dict[str, list[float]] = {
        k: [] for k in ("own", "to arrival", "answer", "own read", "excess", "over")
    }
    for rid, r in answered.items():
        if r.status != 200 or rid not in done or r.wrote is None or r.landed is None:
            continue
        gap = float(arrive[rid].get("arrival_gap", 0.0))
        view = done[rid] - arrive[rid]["t"] + gap
        gaps.append(gap)
        parts["own"].append(r.wrote - r.sent)
        parts["to arrival"].append(arrive[rid]["t"] - gap - (client_zero + r.wrote))
        parts["answer"].append(client_zero + r.landed - done[rid])
        parts["own read"].append(r.done - r.landed)
        parts["excess"].append(view - (r.landed - r.wrote))
        parts["over"].append(view - (r.done - r.wrote))
    assert parts["own"], "no entitled request was answered"
    out = {k: sorted(v) for k, v in parts.items()}
    assert out["over"][len(out["over"]) // 2] <= 0.002, out["over"]  # the median request
    return max(gaps), out


def read_origin(trace: Path) -> float:
    """The Unix time of the trace's 0 (its segment header's ``origin``)."""
    with trace.open() as f:
        return float(json.loads(f.readline())["origin"])


def _median_ms(xs: list[float]) -> str:
    return f"min {xs[0] * 1e3:.1f} ms, median {xs[len(xs) // 2] * 1e3:.1f} ms, max {xs[-1] * 1e3:.1f} ms"


async def _frozen_until(engine: Engine, dispatched: Callable[[], bool], leaving: asyncio.Future[int]) -> None:
    """Freeze (SIGSTOP) the engine from the dispatch on, letting it run 20 ms at a time, until the
    client has left (``leaving`` done); it stays frozen (the caller resumes it).

    A CPU engine writes its tokens into the socket faster than the in-process gateway reads them:
    left to run, it had written all 1,500 by the time the client left after three, and the request
    completed (a clean-clone run at stop 20). Frozen, it has written only a few bursts' worth.
    """
    while not dispatched():
        assert not leaving.done()
        await asyncio.sleep(0.002)
    engine.signal(signal.SIGSTOP)
    while not leaving.done():
        engine.signal(signal.SIGCONT)
        await asyncio.sleep(0.02)
        engine.signal(signal.SIGSTOP)
        await asyncio.sleep(0.2)  # the gateway reads what was written; the client may leave


async def test_client_disconnect_mid_stream_frees_gateway_and_engine_slots(
    engine: Engine, tmp_path: Path
) -> None:
    c, trace = contract(output_cap=1500), tmp_path / "t.jsonl"
    async with (
        gateway(c, settings(engine.url, upstream_api_key=engine.key, trace=trace)) as (gw, url),
        httpx.AsyncClient(timeout=60.0) as client,
    ):
        body = {"model": engine.model, "prompt": "x", "max_tokens": 1500, "stream": True}
        leaving = asyncio.ensure_future(stream_then_leave(client, url, body, "sk-assured"))
        try:
            await _frozen_until(engine, lambda: gw.guard.statistics().in_flight > 0, leaving)
            assert await leaving == 3
            assert await _poll(lambda: gw.guard.statistics().live == 0)  # the engine still frozen
        finally:
            engine.signal(signal.SIGCONT)
        assert await _poll(lambda: engine.running() == 0)
    last = [e for e in read_trace(trace) if e["kind"] != "alert"][-1]  # an alert may follow: it is frozen
    assert last["kind"] == "fail" and last["reason"] == "client-error: disconnect"  # the client's
    assert check_trace(str(trace), c, properties=["AF", "DR", "WF"]).violations == []


async def test_hanging_engine_times_out_then_recovers(engine: Engine, tmp_path: Path) -> None:
    c, trace = contract(), tmp_path / "t.jsonl"
    s = settings(engine.url, upstream_api_key=engine.key, trace=trace, read_timeout=1.0)
    async with gateway(c, s) as (gw, url), httpx.AsyncClient(timeout=30.0) as client:
        body = {"model": engine.model, "prompt": "x", "max_tokens": 8}
        engine.signal(signal.SIGSTOP)  # the whole group: sockets accept, nothing answers
        try:
            hung = await asyncio.gather(
                *(
                    client.post(url + "/v1/completions", json=body, headers=auth(k))
                    for k in ("sk-assured", "sk-opp")
                )
            )
        finally:
            engine.signal(signal.SIGCONT)
        assert [r.status_code for r in hung] == [504, 504]
        assert gw.guard.statistics().in_flight == 0
        ok = await client.post(url + "/v1/completions", json=body, headers=auth("sk-opp"))
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 8
    assert set(terminal_counts(read_trace(trace)).values()) == {1}
    assert check_trace(str(trace), c, properties=["AF", "DR", "WF"]).violations == []


async def test_non_streamed_logprobs_match_the_engine_own_answer(engine: Engine, tmp_path: Path) -> None:
    """Greedy decoding: the gateway's answer (folded from vLLM's stream) = vLLM's own non-streamed one."""
    c = contract()
    prompt = {"prompt": "The floor holds"}
    chat = {"messages": [{"role": "user", "content": "The floor holds"}]}
    cases = [
        ("/v1/completions", {**prompt, "logprobs": 2}),
        ("/v1/chat/completions", {**chat, "logprobs": True}),
    ]
    async with (
        gateway(c, settings(engine.url, upstream_api_key=engine.key, trace=tmp_path / "t.jsonl")) as (
            _gw,
            url,
        ),
        httpx.AsyncClient(timeout=60.0) as client,
    ):
        for path, extra in cases:
            body = {"model": engine.model, "max_tokens": 6, "temperature": 0.0, **extra}
            via = await client.post(url + path, json=body, headers=auth("sk-opp"))
            direct = await client.post(engine.url + path, json=body, headers=engine.headers)
            assert via.status_code == direct.status_code == 200, via.text
            got, want = via.json()["choices"][0]["logprobs"], direct.json()["choices"][0]["logprobs"]
            assert set(got) == set(want) and want
            for key, values in want.items():
                if not isinstance(values, list):
                    continue
                assert len(got[key]) == len(values) > 0, key
                if key in ("tokens", "text_offset"):
                    assert got[key] == values, key
                elif key == "content":
                    assert [x["token"] for x in got[key]] == [x["token"] for x in values]


async def test_token_credits_count_the_prompt_as_the_engine_does(engine: Engine, tmp_path: Path) -> None:
    """The prompt tokens the gateway charges (vLLM's /tokenize) = the engine's own usage.prompt_tokens."""
    tenants_ = {
        "assured": {"floor": 10_000, "deadline": 30.0, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
    }
    c, trace = contract(credit="tokens", tenants=tenants_), tmp_path / "t.jsonl"
    asks = [
        ("/v1/completions", {"prompt": "The admission floor holds whatever the learner says."}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Is the floor held?"}]}),
    ]
    async with (
        gateway(c, settings(engine.url, upstream_api_key=engine.key, trace=trace)) as (_gw, url),
        httpx.AsyncClient(timeout=60.0) as client,
    ):
        used = []
        for path, extra in asks:
            r = await client.post(
                url + path, json={"model": engine.model, "max_tokens": 2, **extra}, headers=auth("sk-assured")
            )
            assert r.status_code == 200, r.text
            used.append(r.json()["usage"]["prompt_tokens"])
    charged = [e["prompt_tokens"] for e in read_trace(trace) if e["kind"] == "arrive"]
    assert charged == used and min(used) > 3


async def test_forged_identities_are_never_served_as_floored_on_the_engine(
    engine: Engine, tmp_path: Path
) -> None:
    """Unknown key, tampered/forged/expired claims, tenant headers and body fields: all opportunistic."""
    c, trace = contract(), tmp_path / "t.jsonl"
    attempts, good = identity_attempts()
    keys = KeysConfig(keys=_KEYS, claim_secret=SECRET, unauthenticated="lowest-tier")  # opted into
    async with (
        gateway(c, settings(engine.url, upstream_api_key=engine.key, trace=trace, keys=keys)) as (_gw, url),
        httpx.AsyncClient(timeout=60.0) as client,
    ):
        body = {"model": engine.model, "prompt": "x", "max_tokens": 2, "user": "assured", "tenant": "assured"}
        answers = [await client.post(url + "/v1/completions", json=body, headers=h) for h in attempts]
        ok = await client.post(url + "/v1/completions", json=body, headers={"x-rvguard-claim": good})
    assert [r.status_code for r in (*answers, ok)] == [200] * (len(attempts) + 1)
    events = read_trace(trace)
    assert list(tenants(events).values()) == ["opportunistic"] * len(attempts) + ["assured"]
    assert [e["basis"] for e in events if e["kind"] == "admit"][-1] == "floor"
    assert check_trace(str(trace), c, properties=["AF", "DR", "WF"]).violations == []


async def test_calibrate_suggests_an_envelope(engine: Engine) -> None:
    cal = await calibrate(
        engine.url, slots=engine.slots, lengths=(8, 32), reps=2, output_cap=32, api_key=engine.key
    )
    lo, up = cal.lower(), cal.upper()
    assert cal.model == engine.model
    every = [x for by in cal.samples.values() for xs in by.values() for x in xs]
    assert len(every) == 2 * 2 * (1 + engine.slots)
    assert all(lo.at(ell) <= x for by in cal.samples.values() for ell, xs in by.items() for x in xs)
    assert up.at(32) >= max(cal.samples[engine.slots][32]) > 0
    assert "s_max" in cal.to_yaml()


async def test_the_sdk_gets_the_engine_own_answers_through_the_gateway(
    engine: Engine, tmp_path: Path
) -> None:
    """Greedy decoding, the official SDK on both sides: the gateway's answers are the engine's own."""
    c, trace = contract(), tmp_path / "t.jsonl"
    msgs = [{"role": "user", "content": "The floor holds"}]
    async with (
        gateway(c, settings(engine.url, upstream_api_key=engine.key, trace=trace)) as (_gw, url),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-opp", max_retries=0) as via,
        openai.AsyncOpenAI(base_url=engine.url + "/v1", api_key=engine.key, max_retries=0) as direct,
    ):
        pairs = []
        for client in (via, direct):
            chat = await client.chat.completions.create(
                model=engine.model,
                messages=msgs,
                max_tokens=6,
                temperature=0.0,
                logprobs=True,  # type: ignore[arg-type]
            )
            text = await client.completions.create(
                model=engine.model, prompt="The floor", max_tokens=6, temperature=0.0
            )
            pairs.append((chat, text))
        pieces = [
            c.choices[0].delta.content or ""
            async for c in await via.chat.completions.create(
                model=engine.model,
                messages=msgs,
                max_tokens=6,
                temperature=0.0,
                stream=True,  # type: ignore[arg-type]
            )
            if c.choices
        ]
    (chat_via, text_via), (chat_direct, text_direct) = pairs
    assert chat_via.choices[0].message.content == chat_direct.choices[0].message.content
    assert chat_via.choices[0].finish_reason == chat_direct.choices[0].finish_reason
    assert chat_via.usage == chat_direct.usage and text_via.usage == text_direct.usage
    got, want = chat_via.choices[0].logprobs, chat_direct.choices[0].logprobs
    assert got is not None and want is not None and got.content and want.content
    assert [x.token for x in got.content] == [x.token for x in want.content]
    assert text_via.choices[0].text == text_direct.choices[0].text
    assert "".join(pieces) == chat_via.choices[0].message.content
    assert check_trace(str(trace), c, properties=["AF", "DR", "WF"]).violations == []


async def test_the_engine_own_400_is_relayed_and_is_no_sf_violation(engine: Engine, tmp_path: Path) -> None:
    """A prompt beyond the engine's context: vLLM's own error object, the SDK's type, no SF blame."""
    c, trace = contract(), tmp_path / "t.jsonl"
    async with (
        gateway(c, settings(engine.url, upstream_api_key=engine.key, trace=trace)) as (_gw, url),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-assured", max_retries=2) as client,
    ):
        with pytest.raises(openai.BadRequestError) as info:
            await client.completions.create(model=engine.model, prompt="word " * 3000, max_tokens=4)
    assert "context" in info.value.message or "length" in info.value.message, info.value.message
    assert info.value.response.headers["x-should-retry"] == "false"
    events = read_trace(trace)
    assert [e["kind"] for e in events] == ["arrive", "admit", "dispatch", "fail"]  # one try: no retry
    assert events[0]["tenant"] == "assured" and events[-1]["reason"] == "client-error: http 400"
    assert check_trace(str(trace), c).violations == []  # SF included


# With the tests that kill an engine, at the end of the session (tests/conftest.py): it kills the
# session's engine and restarts it; a restart that does not come up in time (a saturated machine)
# must not take the tests above down with it. Between tests/fleet's two kills: the first one's
# engine restarts in the background while this one runs.
@pytest.mark.kills_engine(order=1)
async def test_engine_killed_mid_run_and_restarted(engine: Engine, tmp_path: Path) -> None:
    c, trace = contract(), tmp_path / "t.jsonl"
    shots = shots_from_trace(SLICE, rate=20.0, limit=30, output_cap=CAP, min_tokens=32)
    async with gateway(
        c, settings(engine.url, upstream_api_key=engine.key, trace=trace, read_timeout=30.0)
    ) as (gw, url):
        load = asyncio.ensure_future(replay(url, shots, model=engine.model, keys=KEYS, timeout=60.0))
        await asyncio.sleep(0.6)
        engine.kill()
        results = await load
        assert gw.guard.statistics().live == 0 and gw.guard.statistics().in_flight == 0
        engine.start()  # same port: the gateway's upstream URL still holds
        async with httpx.AsyncClient(timeout=60.0) as client:
            body = {"model": engine.model, "prompt": "x", "max_tokens": 4}  # the engine warmed by start()
            after = await client.post(url + "/v1/completions", json=body, headers=auth("sk-opp"))
    statuses = {r.status for r in results}
    assert statuses <= {200, 429, 502} and 502 in statuses
    assert after.status_code == 200, after.text
    counts = terminal_counts(read_trace(trace))
    assert len(counts) == len(shots) + 1 and set(counts.values()) == {1}
    assert check_trace(str(trace), c, properties=["AF", "DR", "WF"]).violations == []
