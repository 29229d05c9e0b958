"""Every experiment ``rvguard experiment NAME`` can run, and the contract each runs by default.

Why a separate module: the experiment modules import the shared result
types from `rvguard.sim.experiments`, so the registry that names them all
cannot live there without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable

from ..contract import Contract
from .experiments import ExperimentResult, beta_sweep, fifo_ablation
from .experiments_admission import demote_vs_reject, token_credits
from .experiments_baselines import rate_limit, server_priority
from .experiments_faults import capacity_drop, gaie_fault
from .experiments_fleet import fleet_pooling
from .experiments_replay import REPLAY_CONTRACT, trace_replay
from .experiments_reserve import reserve_sweep
from .experiments_slices import slices
from .experiments_stress import deadline_sweep, floor_sweep, stress

__all__ = ["DEFAULT_CONTRACTS", "EXPERIMENTS"]

EXPERIMENTS: dict[str, Callable[..., ExperimentResult]] = {
    "beta-sweep": beta_sweep,
    "fifo-ablation": fifo_ablation,
    "deadline-sweep": deadline_sweep,
    "floor-sweep": floor_sweep,
    "stress": stress,
    "trace-replay": trace_replay,
    "gaie-fault": gaie_fault,
    "capacity-drop": capacity_drop,
    "server-priority": server_priority,
    "rate-limit": rate_limit,
    "demote-vs-reject": demote_vs_reject,
    "token-credits": token_credits,
    "slices": slices,
    "fleet-pooling": fleet_pooling,
    "reserve-sweep": reserve_sweep,
}

# Experiments whose default contract is not the marquee's (None: the marquee).
DEFAULT_CONTRACTS: dict[str, Contract] = {
    "trace-replay": REPLAY_CONTRACT,
    "slices": REPLAY_CONTRACT,
    "demote-vs-reject": REPLAY_CONTRACT,
}
