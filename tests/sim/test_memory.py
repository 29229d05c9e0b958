"""The memory-pressure model: KV grows with the tokens generated, and is freed at a stop."""

from __future__ import annotations

import math

import pytest

from rvguard.errors import SpecError
from rvguard.sim.memory import KVCache, PressureModel


def test_kv_grows_with_tokens_generated_and_a_stop_frees_it() -> None:
    kv = KVCache(1000, token_rate=10.0)
    kv.start("a", 100, 20)
    kv.start("b", 200, 50)
    assert kv.used == 300 and kv.headroom == pytest.approx(0.7) and kv.growth == 70
    assert kv.step(1.0) == []
    assert kv.used == pytest.approx(320) and kv.generated("a") == 10 and kv.growth == 50
    assert kv.step(1.0) == ["a"]  # a reached its 20 tokens
    kv.stop("a")
    assert kv.used == pytest.approx(220) and kv.generated("a") == 0  # b: 200 + 20
    kv.stop("a")  # a no-op
    kv.start("c", 5000, 1)
    assert kv.headroom == 0.0  # past its capacity the cache reads full, it refuses nothing


def test_the_sustainable_level_is_what_fits_above_it_at_full_size() -> None:
    model = PressureModel(capacity=2000, prompt_tokens=200, output_tokens=120, token_rate=20.0)
    assert model.footprint == 320 and model.service == 6.0
    assert model.sustainable(0.35) == math.floor(0.65 * 2000 / 320) == 4
    assert model.sustainable(0.15) == 5


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"capacity": 0}, "capacity"),
        ({"capacity": 10, "clients": 0}, "clients"),
        ({"capacity": 10, "prompt_tokens": -1}, "prompt_tokens"),
        ({"capacity": 10, "tick": 0.0}, "tick"),
        ({"capacity": 10, "duration": math.inf}, "duration"),
        ({"capacity": 10, "retry_after": -1.0}, "retry_after"),
    ],
)
def test_the_model_is_checked_at_construction(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as err:
        PressureModel(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field
