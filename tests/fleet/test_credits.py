"""The shared credit pool on a real Redis: pooling, reserves, fallback, fencing, recovery."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rvguard.contract import Contract
from rvguard.errors import StoreUnavailableError
from rvguard.fleet.credits import CreditsConfig, RedisStore, SharedCredits, reserves_of

from ._pool import FaultyStore, pool_contract, replica

HALF = {"a": 0.5, "b": 0.5}
Replicas = Callable[..., tuple[SharedCredits, FaultyStore]]


@pytest.fixture
async def make(redis_url: str) -> AsyncIterator[Replicas]:
    """``make(contract, name, shares=HALF, now=0.0)``: a replica on the test's Redis, closed after."""
    made: list[SharedCredits] = []

    def factory(contract: Contract, name: str, shares: dict[str, float] = HALF, now: float = 0.0):
        pool, store = replica(contract, redis_url, name, shares, now=now)
        made.append(pool)
        return pool, store

    yield factory
    for pool in made:
        await pool.aclose()


async def _spend(pool: SharedCredits, n: int, t: float) -> list[str]:
    """``n`` arrivals of gold at ``t``; each decision as ``mode:reason`` (``reason`` empty if granted)."""
    out = []
    for _ in range(n):
        d = await pool.spend("gold", 1.0, t)
        out.append(f"{d.mode}:{d.reason}")
    return out


async def _unfence(pool: SharedCredits, t: float) -> None:
    """A fresh store fences the first windows: pass them (heartbeats at t, t+1, t+2 ... windows)."""
    await pool.heartbeat(t)


async def test_pooled_one_replica_may_spend_all_of_b_once_both_joined(make: Replicas) -> None:
    c = pool_contract(4)
    a, _ = make(c, "a")
    b, _ = make(c, "b")
    await a.heartbeat(0.0)  # fresh store: fences windows 0 and 1
    await b.heartbeat(0.0)  # b holds its name lease
    assert a.statistics().fenced == 1
    await b.heartbeat(2.0)
    assert await _spend(a, 5, 2.1) == ["shared:"] * 4 + ["shared:excess"]
    assert a.statistics().shared_grants == 4 and a.statistics().refused_excess == 1


async def test_a_reserve_is_held_until_its_replica_joins(make: Replicas) -> None:
    c = pool_contract(4)
    a, _ = make(c, "a")
    b, _ = make(c, "b")
    await a.heartbeat(0.0)
    await b.heartbeat(0.0)  # b holds its lease but never joins window 2
    await a.heartbeat(2.0)  # a confirms window 2
    got = await _spend(a, 4, 2.1)  # b's reserve (2) stays held
    assert got == ["shared:", "shared:", "shared:floor-lowered", "shared:floor-lowered"]


async def test_store_down_each_replica_spends_its_reserve_only(make: Replicas) -> None:
    c = pool_contract(5)
    shares = {"a": 0.6, "b": 0.4}
    a, sa = make(c, "a", shares)
    b, sb = make(c, "b", shares)
    await a.heartbeat(0.0)
    await b.heartbeat(0.0)
    sa.mode = sb.mode = "down"
    assert await _spend(a, 1, 0.5) == ["static:floor-lowered"]  # the start window: nothing alone
    assert await _spend(a, 1, 1.5) == [
        "static:floor-lowered"
    ]  # nor the next (a past life may have confirmed it)
    got_a = await _spend(a, 5, 2.5)
    got_b = await _spend(b, 4, 2.5)
    assert got_a == ["static:"] * 3 + ["static:floor-lowered"] * 2  # ⌊0.6·5⌋ = 3
    assert got_b == ["static:"] * 2 + ["static:floor-lowered"] * 2  # ⌊0.4·5⌋ = 2
    assert not a.up and a.statistics().outages == 1
    assert reserves_of(c, shares) == {"a": {"gold": 3.0}, "b": {"gold": 2.0}}


async def test_static_spending_enters_the_pool_when_the_store_answers_again(make: Replicas) -> None:
    c = pool_contract(4)
    a, sa = make(c, "a")
    b, _ = make(c, "b")
    await a.heartbeat(0.0)
    sa.mode = "down"
    await a.heartbeat(2.0)  # fails: a is down, window 2 counts as joined for it
    assert not a.up
    assert await _spend(a, 2, 3.1) == ["static:", "static:"]  # window 3: a's reserve
    sa.mode = "up"
    await a.heartbeat(3.2)  # ping answers: back on the pool, joining with its 2 static credits
    assert a.up
    await b.heartbeat(3.3)
    assert await _spend(b, 3, 3.4) == ["shared:", "shared:", "shared:excess"]  # 2 + 2 = B


async def test_a_lost_answer_releases_nothing_so_the_reserve_is_spent_alone(make: Replicas) -> None:
    c = pool_contract(4)
    a, sa = make(c, "a")
    b, _ = make(c, "b")
    await a.heartbeat(0.0)
    await b.heartbeat(0.0)
    await b.heartbeat(2.0)  # b confirms window 2; a has had no answer there
    sa.mode = "late"  # the script runs (a credit is spent in the pool) but a never hears back
    assert await _spend(a, 2, 2.1) == ["static:", "static:"]  # a's reserve (2), alone
    got = await _spend(b, 4, 2.2)  # a's reserve stays held: b gets B - 2 - the lost grant
    assert got == ["shared:", "shared:floor-lowered", "shared:floor-lowered", "shared:excess"]


async def test_once_answered_in_a_window_a_replica_spends_nothing_alone_there(make: Replicas) -> None:
    c = pool_contract(4)
    a, sa = make(c, "a")
    await a.heartbeat(0.0)
    await a.heartbeat(2.0)  # answered (and confirmed) in window 2
    sa.mode = "down"
    assert await _spend(a, 1, 2.5) == ["static:floor-lowered"]
    assert await _spend(a, 1, 3.5) == ["static:"]  # window 3: no answer yet, a's reserve


async def test_a_flushed_store_fences_this_window_and_the_next(make: Replicas, redis_server) -> None:
    c = pool_contract(4)
    a, _ = make(c, "a")
    await a.heartbeat(0.0)
    await a.heartbeat(2.0)
    assert await _spend(a, 1, 2.1) == ["shared:"]
    redis_server.flush()  # the store forgets window 2's spending
    assert await _spend(a, 1, 2.2) == ["static:floor-lowered"]  # a joined window 2: nothing alone
    assert await _spend(a, 1, 3.2) == ["static:"]  # window 3 fenced, never joined: a's reserve
    assert a.up and a.statistics().fenced == 3
    await a.heartbeat(4.0)
    assert await _spend(a, 1, 4.2) == ["shared:"]


async def test_a_restarted_replica_sits_out_its_start_window(make: Replicas) -> None:
    c = pool_contract(4)
    a, sa = make(c, "a", HALF, now=5.5)
    await a.heartbeat(5.5)
    sa.mode = "down"
    assert await _spend(a, 1, 5.6) == ["static:floor-lowered"]
    assert await _spend(a, 1, 6.1) == ["static:floor-lowered"]
    assert await _spend(a, 1, 7.1) == ["static:"]


async def test_token_credits_spend_weights(make: Replicas) -> None:
    c = pool_contract(100, credit="tokens")
    a, _ = make(c, "a", {"a": 1.0})
    await a.heartbeat(0.0)
    await a.heartbeat(2.0)
    got = [await a.spend("gold", w, 2.5) for w in (60.0, 30.0, 20.0)]
    assert [(d.granted, d.reason, d.arrived) for d in got] == [
        (True, "", 60.0),
        (True, "", 90.0),
        (False, "excess", 110.0),
    ]
    assert got[0].trace_fields() == {"credit": "shared", "pool_arrived": 60.0}


async def test_an_unreachable_store_is_declared(unused_tcp_port: int) -> None:
    store = RedisStore(f"redis://127.0.0.1:{unused_tcp_port}/0", timeout=0.2)
    with pytest.raises(StoreUnavailableError, match=r"Error|refused|Connect"):
        await store.ping()
    await store.aclose()


async def test_unfloored_tenants_spend_no_credit(make: Replicas) -> None:
    a, _ = make(pool_contract(), "a")
    with pytest.raises(KeyError, match="no floor"):
        await a.spend("free", 1.0, 1.0)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"shares": {"a": 0.7, "b": 0.4}}, "sum to 1.1"),
        ({"replica": "c"}, "not among the shares"),
        ({"url": "http://x"}, "redis://"),
        ({"shares": {"a b": 1.0}, "replica": "a b"}, "replica id"),
        ({"timeout": 0.0}, "greater than 0"),
    ],
)
def test_config_is_validated(change: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"url": "redis://127.0.0.1:1/0", "replica": "a", "shares": dict(HALF)}
    with pytest.raises(ValidationError, match=match):
        CreditsConfig.model_validate({**base, **change})


ACL = "on >s3cret ~rvguard:* resetchannels -@all +evalsha +script|load +ping +time +config|get"
ACL_LUA = " +get +set +exists +hget +hset +hsetnx +hexists +hincrbyfloat +pexpire"


async def test_the_documented_acl_user_runs_the_pool_and_nothing_else(redis_url: str) -> None:
    from redis.asyncio import Redis

    admin = Redis.from_url(redis_url, decode_responses=True)
    await admin.execute_command("ACL", "SETUSER", "pool", *(ACL + ACL_LUA).split())
    docs = (Path(__file__).parents[2] / "docs" / "fleet.md").read_text(encoding="utf-8")
    assert f"ACL SETUSER rvguard {ACL.replace('s3cret', 'CHANGE-ME')}{ACL_LUA}" in docs
    c = pool_contract(2)
    shares = {"a": 0.5, "b": 0.5}  # b never starts: its lease is missing, its reserve returns
    cfg = CreditsConfig(url=redis_url, replica="a", shares=shares, username="pool", password="s3cret")
    t0 = time.time()
    a = SharedCredits.open(c, cfg, now=t0)
    try:
        await a.warm(_store_clock())  # the clock runs: a frozen one read the connects' time as skew
        assert not a.refusal, a.refusal
        await admin.set("rvguard:fence", "0")
        await a.heartbeat(t0 + 1.0)
        assert await _spend(a, 3, t0 + 1.0) == ["shared:", "shared:", "shared:excess"]
        with pytest.raises(Exception, match="no permissions"):
            await a._store._client.flushdb()  # type: ignore[attr-defined]
    finally:
        await a.aclose()
        await admin.execute_command("ACL", "DELUSER", "pool")
        await admin.aclose()


def _store_clock() -> Callable[[], float]:
    """The test's clock: Unix time (the test's redis-server runs on this machine)."""
    return time.time


async def test_refuses_to_pool_on_an_evicting_store_a_skewed_clock_or_a_taken_name(redis_url: str) -> None:
    from redis.asyncio import Redis

    admin = Redis.from_url(redis_url, decode_responses=True)
    c = pool_contract(2)
    made: list[SharedCredits] = []

    def pool(name: str = "a") -> SharedCredits:
        cfg = CreditsConfig(url=redis_url, replica=name, shares={"a": 0.5, "b": 0.5}, prefix="refuse")
        made.append(SharedCredits.open(c, cfg, now=0.0))
        return made[-1]

    try:
        await admin.config_set("maxmemory-policy", "volatile-ttl")
        try:
            evicting = pool()
            await evicting.warm(_store_clock())
        finally:
            await admin.config_set("maxmemory-policy", "noeviction")
        assert "maxmemory-policy is volatile-ttl" in evicting.refusal
        assert not evicting.up and evicting.readiness() == evicting.refusal
        skewed = pool()
        await skewed.warm(lambda: time.time() + 5.0)
        assert "clock is +5.0" in skewed.refusal
        first, second = pool("a"), pool("a")
        await first.warm(_store_clock())
        await second.warm(_store_clock())  # takes the name over (a restart need not wait)
        now = time.time()
        await first.heartbeat(now)  # finds the name taken: steps down for good
        assert not second.refusal and "taken by another live process" in first.refusal
        assert (await first.spend("gold", 1.0, now)).reason == "floor-lowered"  # nothing, not even R
        assert first.statistics().refusal and not second.statistics().refusal
        assert first.readiness() == first.refusal
    finally:
        for p in made:
            await p.aclose()
        await admin.aclose()


async def test_a_replica_started_while_the_store_was_away_checks_it_when_it_answers(
    redis_server: Any, redis_url: str
) -> None:
    """Before: the checks ran in `warm` only, so a replica started during an outage pooled on an
    evicting store (or with a skewed clock) once the store answered, and nothing said why."""
    from redis.asyncio import Redis

    admin = Redis.from_url(redis_url, decode_responses=True)
    c = pool_contract(2)
    made: list[SharedCredits] = []
    try:
        for policy, clock in (("volatile-ttl", time.time), ("noeviction", lambda: time.time() + 5.0)):
            await admin.config_set("maxmemory-policy", policy)
            cfg = CreditsConfig(url=redis_url, replica="a", shares=HALF, prefix="away", timeout=0.1)
            made.append(SharedCredits.open(c, cfg, now=time.time()))
            redis_server.pause()
            try:
                await made[-1].warm(clock)  # times out: nothing checked yet
            finally:
                redis_server.resume()
            assert not made[-1].up and not made[-1].refusal
            for _ in range(3):
                await made[-1].heartbeat(clock())
            assert not made[-1].up and made[-1].readiness() == made[-1].refusal
        assert "maxmemory-policy is volatile-ttl" in made[0].refusal
        assert "clock is +5.0" in made[1].refusal
    finally:
        await admin.config_set("maxmemory-policy", "noeviction")
        for p in made:
            await p.aclose()
        await admin.aclose()


async def test_forged_pool_values_are_refused_and_the_static_share_spent(
    make: Replicas, redis_url: str
) -> None:
    from redis.asyncio import Redis

    c = pool_contract(4)
    a, _ = make(c, "a")
    await a.heartbeat(0.0)
    await a.heartbeat(2.0)
    admin = Redis.from_url(redis_url, decode_responses=True)
    try:
        await admin.hset("t:pool:gold:3", mapping={"arrived": "-1000", "spent": "-1000"})
        got = await _spend(a, 3, 3.1)
    finally:
        await admin.aclose()
    assert got == ["static:", "static:", "static:floor-lowered"]  # a's reserve (2), no more
    assert a.statistics().invalid == 3 and "impossible values" in a.statistics().last_error


def test_the_redis_password_comes_from_the_environment_or_a_file_and_urls_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from rvguard.fleet.store import redact
    from rvguard.gateway.cli import _credits

    def args(**extra: object) -> argparse.Namespace:
        base = {"credits": "redis://pool@10.0.0.5:6379/0", "replica": "a", "share": ["0.5"]}
        return argparse.Namespace(**{"credit_timeout": 0.05, "credits_password_file": None, **base, **extra})

    monkeypatch.setenv("RVGUARD_REDIS_PASSWORD", "from-env")
    cfg = _credits(args())
    assert (cfg.username, cfg.password) == ("pool", "from-env")
    secret = tmp_path / "redis.pass"
    secret.write_text("from-file\n")
    assert _credits(args(credits_password_file=str(secret))).password == "from-file"
    assert "from-env" not in repr(cfg) and "from-env" not in str(cfg.model_dump(exclude={"password"}))
    assert redact("redis://user:pw@host:6379/0") == "redis://***@host:6379/0"
    assert redact("rediss://:pw@host/1") == "rediss://***@host/1"
    assert redact("redis://host:6379/0") == "redis://host:6379/0"
    assert (
        CreditsConfig(url="redis://user:pw@h/0", replica="a", shares={"a": 1}).safe_url == "redis://***@h/0"
    )


async def test_a_lapsed_lease_returns_the_reserve_and_its_replica_spends_nothing_alone(
    make: Replicas, redis_url: str
) -> None:
    from redis.asyncio import Redis

    c = pool_contract(4)
    a, _ = make(c, "a")
    b, sb = make(c, "b")
    await a.heartbeat(0.0)
    await b.heartbeat(0.0)  # b's lease covers windows that end a margin before 30 s
    await a.heartbeat(2.0)
    assert await _spend(a, 3, 2.1) == ["shared:", "shared:", "shared:floor-lowered"]  # b's 2 held
    sb.mode = "down"  # b is cut off; Redis lets its lease lapse (here: at once)
    admin = Redis.from_url(redis_url, decode_responses=True)
    try:
        await admin.delete("t:name:b")
    finally:
        await admin.aclose()
    await a.heartbeat(3.0)
    assert await _spend(a, 5, 3.1) == ["shared:"] * 4 + ["shared:excess"]  # b's reserve returned
    assert await _spend(b, 2, 27.5) == ["static:", "static:"]  # b's own reckoning: still covered
    assert await _spend(b, 1, 29.5) == ["static:floor-lowered"]  # past its lease: nothing alone
    sb.mode = "up"
    await b.heartbeat(40.0)  # rejoins: its name claimed again, window 40 a start window
    assert not b.refusal and b.up
    sb.mode = "down"
    assert await _spend(b, 1, 41.5) == ["static:floor-lowered"]  # the next: nothing alone either
    assert await _spend(b, 1, 42.5) == ["static:"]


async def test_a_fresh_store_fences_only_what_a_lost_state_could_hold(make: Replicas) -> None:
    """A fleet started early in a window on a fresh Redis pools the next window (issue 28's 0 of 8).

    The first call finds no fence marker; it fences windows up to the one holding its send time plus
    the time-out, twice the skew bound and the lead (here 0.1 + 2 s: window 0), not always the next:
    a burst at window 1's start gets min(B, offered) fleet-wide, as with any healthy store."""
    c = pool_contract(3, window=5.0)
    a, _ = make(c, "a", now=0.1)
    b, _ = make(c, "b", now=0.1)
    for pool in (a, b):
        await pool.heartbeat(0.1)  # the first call fences (window 0 only)
    assert a.statistics().fenced == 1
    for pool in (a, b):
        await pool.heartbeat(4.0)  # a lead before window 1: joined and confirmed ahead
    got = [*await _spend(a, 2, 5.01), *await _spend(b, 2, 5.02)]
    assert sorted(got) == ["shared:", "shared:", "shared:", "shared:excess"], got
