"""The experiment registry: every name issues 5 and 14 ask for, each runnable from the CLI."""

from __future__ import annotations

import inspect

from rvguard.sim.catalog import DEFAULT_CONTRACTS, EXPERIMENTS


def test_every_issue_5_and_14_experiment_is_registered() -> None:
    want = {
        "beta-sweep",
        "fifo-ablation",
        "deadline-sweep",
        "floor-sweep",
        "stress",
        "trace-replay",
        "gaie-fault",
        "capacity-drop",
        "server-priority",
        "rate-limit",
        "demote-vs-reject",
        "token-credits",
        "slices",
        "fleet-pooling",  # issue 13
        "reserve-sweep",  # issue 12
    }
    assert set(EXPERIMENTS) == want
    assert set(DEFAULT_CONTRACTS) <= want


def test_every_experiment_takes_reps_and_seed() -> None:
    for name, fn in EXPERIMENTS.items():
        params = inspect.signature(fn).parameters
        assert {"reps", "seed"} <= set(params), name
        assert params["reps"].default >= 1, name
