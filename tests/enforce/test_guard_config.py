"""The Guard's settings are one frozen value: what the caller built is what the Guard runs with."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rvguard.enforce import GuardConfig
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard
from rvguard.properties.load import load_properties

from ._harness import make_contract

TABLE = Path(__file__).parents[2] / "examples/properties/tenant_concurrency.yaml"


def _guard(config: GuardConfig | None = None) -> Guard:
    dispatcher = MockDispatcher(lambda r: Response())
    if config is None:
        return Guard(make_contract(), dispatcher)
    return Guard(make_contract(), dispatcher, config=config)


def test_a_guard_without_a_config_runs_the_defaults() -> None:
    assert _guard().config == GuardConfig()


def test_the_config_is_frozen_and_the_guard_keeps_what_it_was_given() -> None:
    config = GuardConfig(timeout=2.5, drain=False, preempt_grace=0.5, retry_after=3.0)
    guard = _guard(config)
    assert guard.config is config
    assert guard.preemption.retry_after == 3.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.timeout = 1.0  # type: ignore[misc]


def test_the_callers_list_of_tables_cannot_change_the_config_afterwards() -> None:
    tables = list(load_properties(TABLE))
    config = GuardConfig(properties=tables)
    tables.clear()
    assert len(config.properties) == 1 and isinstance(config.properties, tuple)
    assert _guard(config).shield is not None  # the table is enforced


def test_an_empty_config_enforces_no_table() -> None:
    assert _guard(GuardConfig()).shield is None
