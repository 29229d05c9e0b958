"""The Guard's configuration: one typed, frozen object with a default for every knob.

`Guard(contract, dispatcher, config=GuardConfig(...))` takes its collaborators (learner, sinks,
clock, identity binder, headroom source, credit pool) as arguments and everything that is a
setting here, so a deployment's settings are one value that can be built, compared and passed on
(the gateway builds it from its settings) instead of sixteen keyword arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..properties.table import PropertyTable
from .bounded import DEFAULT_LEARNER_TIMEOUT
from .core import DispatchPolicy
from .eviction import EvictionConfig
from .redline import RedlineConfig
from .watch import DEFAULT_WATCH, WatchConfig

__all__ = ["GuardConfig"]


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """Every setting of a `Guard`; the defaults are the library's.

    Args:
        learner_timeout: seconds the learner may take to answer (`bounded.BoundedLearner`;
            ``None``: no limit, a synchronous learner asked inline).
        timeout: seconds a dispatch may take before it is failed (``None``: no limit).
        drain: on exit, wait for live requests (else fail them at once).
        drain_timeout: the longest the drain waits before failing the rest.
        dispatch_policy, deferred_drop, gate_upper, watch: passed to `DecisionCore` (the watch is
            on by default, alerting only; ``watch=None`` turns it off).
        preempt_grace: seconds a preempted request may still run before it is stopped (`preempt`).
        retry_after: the retry hint (seconds) a preempted caller gets.
        redline, headroom_interval: the core's redline (`rvguard.enforce.demotion`), fed from the
            Guard's headroom source polled every ``headroom_interval`` s at most (`HeadroomLoop`).
        eviction: the emergency eviction channel past the hard floor (`rvguard.enforce.emergency`;
            needs a headroom source); default: the contract's ``eviction`` block's, if it states
            one, else every running surplus request is preempted there.
        properties: a user's tables, enforced live (`rvguard.enforce.gate`: an admission that would
            break one is refused with reason ``property: NAME``, a dispatch kept queued; built-in
            guarantees come first, a conflict is a ``shield`` alert record).
        shadow: run ``properties`` in shadow only (`rvguard.enforce.shadow`): the core decides
            alone, and each event a table would have refused is a ``shield`` alert record.
        stall_threshold: seconds late that make an event-loop stall a ``stall`` record
            (`rvguard.enforce.stall`); ``None``: no watchdog.
    """

    learner_timeout: float | None = DEFAULT_LEARNER_TIMEOUT
    timeout: float | None = None
    drain: bool = True
    drain_timeout: float | None = 30.0
    dispatch_policy: DispatchPolicy = "priority"
    deferred_drop: bool = False
    gate_upper: bool = False
    watch: WatchConfig | None = DEFAULT_WATCH
    preempt_grace: float = 0.0
    retry_after: float = 1.0
    redline: RedlineConfig | None = None
    headroom_interval: float = 1.0
    eviction: EvictionConfig | None = None
    properties: Sequence[PropertyTable] = ()
    shadow: bool = False
    stall_threshold: float | None = None

    def __post_init__(self) -> None:
        # a tuple, so the frozen value cannot change under the Guard through the caller's list
        object.__setattr__(self, "properties", tuple(self.properties))
