"""Rationing by default (issue 24): the KV cache's size in tokens read from vLLM's
``vllm:cache_config_info`` labels, and a headroom loop that rations with it, past the hard floor
preempting only the fewest; without a stated size it preempts every running surplus request."""

from __future__ import annotations

import asyncio

import pytest

from rvguard.clock import ManualClock
from rvguard.enforce.dispatchers import MockDispatcher
from rvguard.enforce.guard import Guard
from rvguard.enforce.guard_config import GuardConfig
from rvguard.enforce.headroom import MetricsHeadroomSource, kv_capacity_from_exposition
from rvguard.enforce.rationing import ReliefConfig
from rvguard.enforce.redline import HeadroomSample
from rvguard.enforce.request import Request
from rvguard.errors import TelemetryFormatError

from ._harness import check_wf, make_contract
from .test_headroom import EXPOSITION, _Exporter, exporter  # noqa: F401 - the fixture
from .test_preemption import check_pr
from .test_pressure import CONFIG, Engine, _until


def _info(*engines: tuple[str, str]) -> str:
    """``vllm:cache_config_info`` as vLLM V1 writes it: one gauge at 1 per engine, its configuration
    as labels (``num_gpu_blocks`` is ``None`` until the cache is profiled)."""
    lines = ["# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
             "# TYPE vllm:cache_config_info gauge"]  # fmt: skip
    for n, (blocks, size) in enumerate(engines):
        labels = f'block_size="{size}",cache_dtype="auto",engine="{n}",gpu_memory_utilization="0.9"'
        lines.append(f'vllm:cache_config_info{{{labels},num_gpu_blocks="{blocks}"}} 1.0')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("engines", "tokens"),
    [
        ([("1000", "16")], 16_000),
        ([("1000", "16"), ("600", "16")], 9_600),  # two engines: the smallest cache decides
        ([("None", "16")], None),  # not profiled yet
        ([("0", "16")], None),
        ([], None),
    ],
)
def test_the_kv_cache_size_is_blocks_times_block_size(
    engines: list[tuple[str, str]], tokens: int | None
) -> None:
    assert kv_capacity_from_exposition(EXPOSITION + _info(*engines)) == tokens


def test_an_unparsable_exposition_is_a_format_error() -> None:
    with pytest.raises(TelemetryFormatError):
        kv_capacity_from_exposition("vllm:cache_config_info{block_size=16 1\n")


async def test_the_source_keeps_the_size_once_stated(exporter: tuple[_Exporter, str]) -> None:  # noqa: F811
    state, url = exporter
    clock = ManualClock()
    source = MetricsHeadroomSource(url, clock, min_interval=0.0)
    await source.read()
    assert source.kv_capacity is None  # vLLM's usage without its configuration: not stated
    state.body = EXPOSITION + _info(("None", "16"))
    await source.read()
    assert source.kv_capacity is None
    state.body = EXPOSITION + _info(("2048", "16"))
    await source.read()
    assert source.kv_capacity == 32_768
    state.body = EXPOSITION + _info(("1", "16"))
    await source.read()
    assert source.kv_capacity == 32_768  # kept: a cache is sized once


class Stated:
    """A headroom source stating the KV cache's size, with the headroom the engine's gauge shows."""

    def __init__(self, engine: Engine, clock: ManualClock, kv_capacity: int | None) -> None:
        self.engine, self.clock, self.kv_capacity = engine, clock, kv_capacity

    async def read(self) -> list[HeadroomSample]:
        return [HeadroomSample("kv_cache", self.engine.headroom, self.clock.now())]


async def _past_the_floor(kv_capacity: int | None, *, by_default: bool = True) -> tuple[Guard, list[str]]:
    """Four running (one assured), then headroom 0: who is preempted."""
    engine, trace, clock = Engine(), [], ManualClock()  # type: ignore[var-annotated]
    guard = Guard(
        make_contract(slots=4),
        MockDispatcher(engine.serve),
        sinks=[trace.append],
        clock=clock,
        headroom=Stated(engine, clock, kv_capacity),
        config=GuardConfig(redline=CONFIG, headroom_interval=3600.0),  # polled by hand
    )
    loop = guard.headroom
    assert loop is not None
    loop.ration_by_default = by_default
    async with guard:
        four = (("a", "assured", 900), ("o1", "opp", 100), ("o2", "opp", 30), ("o3", "opp", 20))
        calls = [
            asyncio.ensure_future(guard.submit(Request(rid, tenant, 0.0, None, prompt, 16)))
            for rid, tenant, prompt in four
        ]
        await _until(lambda: len(guard.running()) == 4, "all four to run")
        engine.headroom = 0.0  # 0.05 of 1000 tokens = 50 short of the hard floor
        clock.advance(1.0)
        await loop.poll()
        for _ in range(5):  # the stops run on the loop (a grace of 0)
            await asyncio.sleep(0)
        preempted = sorted({"a", "o1", "o2", "o3"} - set(guard.running()))
        for rid in guard.running():
            engine.done(rid)
        await asyncio.gather(*calls)
    check_pr(trace)
    check_wf(trace)
    return guard, preempted


async def test_a_stated_cache_size_rations_relief_by_default() -> None:
    guard, preempted = await _past_the_floor(1000)
    assert guard.headroom is not None and guard.headroom.relief == ReliefConfig(1000)
    assert preempted == ["o1"]  # the fewest: o1's 100 tokens cover the 50 short; a is never a candidate


async def test_without_a_stated_size_or_when_turned_off_every_running_surplus_request_is_preempted() -> None:
    for capacity, by_default in ((None, True), (1000, False)):
        guard, preempted = await _past_the_floor(capacity, by_default=by_default)
        assert guard.headroom is not None and guard.headroom.relief is None
        assert preempted == ["o1", "o2", "o3"]
