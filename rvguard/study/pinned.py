"""Engine evidence under a pinned protocol: load recorded per arm, k re-measured, contended arms redone.

Why: on a small shared machine the engine's capacity moves with everything
else that runs, so an engine run on a loaded machine tests the machine, not
the guard (issue 27). The protocol (``scripts/engine_protocol.py`` drives it,
docs/experiments.md "Engine evidence") runs one experiment at a time, the
engine pinned to its own core and the gateway and client to the other, and
for every arm:

1. re-measures the path's capacity, hence k (`rvguard.study.live.path_capacity`);
2. runs the arm (`rvguard.study.live.LiveRunner`, traces kept);
3. records the machine's 1-minute load before and after, and the CPU its own
   processes (``own``: the engine's process group and this one) and all the
   others (``foreign``) used over the arm, from ``/proc``;
4. marks the arm *contended* when the CPU all the other processes used
   passed ``foreign`` (or, opted into with ``threshold``, when the load
   beyond its own processes, load − own CPU, passed it at either end); a
   contended arm is run again, up to ``attempts`` times, and every attempt's
   load is reported.

Why the foreign CPU and not the load: the 1-minute load counts runnable
threads, and the run's own (the engine's API server and core, the gateway,
the client) queue for its two CPUs. In the first protocol runs (corner and
fifo-ablation, 2026-12-06) every flood arm had a load 1.5–1.7 above its own
CPU while the other processes used 0.05–0.08 of a core: the load rule marked
arms contended that nothing else contended, and ran each twice.

`corner` adds the B = C cell at ρ_eff ≤ 0.7, where a guarded miss under held
preconditions tests the guard itself (a defect, DESIGN §12).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract import Contract
from ..sim.experiments import ExperimentResult, require_roles
from ..sim.record import Condition
from ..sim.runner import Arm, Arrivals, Runner, run_arms, with_floored
from ..sim.workloads import floor_rate
from .live import scale_from_capacity

__all__ = [
    "CORNER_OPP_RATES",
    "CpuSample",
    "PinnedRunner",
    "contended",
    "corner",
    "cpu_sample",
    "group_pids",
    "machine_load",
]

CORNER_OPP_RATES: tuple[float, ...] = (2.0, 14.0)  # a light surplus (ρ total ≈ 0.6) and the flood
THRESHOLD: float | None = None  # load beyond the run's own processes that marks an arm contended (off)
FOREIGN = 0.25  # CPU cores the machine's other processes may use before an arm is contended


@dataclass(frozen=True)
class CpuSample:
    """The machine's and the run's own CPU counters at one instant (clock ticks) and the load."""

    t: float
    busy: int
    own: int
    load1: float


def _busy(stat: str) -> int:
    """Busy ticks of every CPU from ``/proc/stat``'s first line (all but idle and iowait)."""
    fields = [int(x) for x in stat.split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq + steal


def _ticks(pid: int, proc: Path) -> int:
    """utime + stime of ``pid`` (0 when it has gone)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return 0
    rest = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return int(rest[11]) + int(rest[12])


def group_pids(pgid: int, proc: Path = Path("/proc")) -> list[int]:
    """Every process of process group ``pgid`` (an engine started in its own session)."""
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            rest = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[2]) == pgid:
            out.append(int(entry.name))
    return out


def cpu_sample(own: Iterable[int], proc: Path = Path("/proc")) -> CpuSample:
    """Counters now: all CPUs' busy ticks, ``own`` processes' ticks, the 1-minute load."""
    import time

    load1 = float((proc / "loadavg").read_text().split()[0])
    busy = _busy((proc / "stat").read_text())
    return CpuSample(time.monotonic(), busy, sum(_ticks(p, proc) for p in own), load1)


def machine_load(before: CpuSample, after: CpuSample, hz: float | None = None) -> dict[str, float]:
    """What ran between two samples: the run's own CPU, everyone else's (cores), and the loads."""
    hz = hz or float(os.sysconf("SC_CLK_TCK"))
    wall = max(after.t - before.t, 1e-9)
    own = (after.own - before.own) / hz / wall
    busy = (after.busy - before.busy) / hz / wall
    return {
        "seconds": round(wall, 2),
        "loadavg_1m_before": before.load1,
        "loadavg_1m_after": after.load1,
        "own_cpu": round(own, 3),
        "foreign_cpu": round(max(0.0, busy - own), 3),
        "excess_load": round(max(before.load1, after.load1) - own, 3),
    }


def contended(
    load: dict[str, float], *, threshold: float | None = THRESHOLD, foreign: float = FOREIGN
) -> bool:
    """True when the others' CPU passed its bound, or (``threshold`` set) the load beyond our own."""
    over_load = threshold is not None and load["excess_load"] > threshold
    return over_load or load["foreign_cpu"] > foreign


class PinnedRunner:
    """Runs each arm under the protocol (module doc); a drop-in for `rvguard.sim.runner.run_arms`.

    Args:
        live: the engine runner (its ``scale`` and ``info`` are set before each arm).
        capacity: measures the path's sustained requests/s now (k is derived from it).
        sample: the counters now (`cpu_sample` over the run's own processes).
        keep: which arms to run (the rest are left out of the document).
        duration: the arms' load duration in the study's seconds (None: the experiment's own).
        finished: told every condition as its arm ends (a run stopped early keeps what it measured).
    """

    def __init__(
        self,
        live: Any,
        *,
        capacity: Callable[[], Any],
        sample: Callable[[], CpuSample],
        threshold: float | None = THRESHOLD,
        foreign: float = FOREIGN,
        attempts: int = 2,
        keep: Callable[[Arm], bool] = lambda _: True,
        duration: float | None = None,
        progress: Callable[[str], None] = lambda _: None,
        finished: Callable[[Condition], None] = lambda _: None,
    ) -> None:
        self.live = live
        self.finished = finished
        self.capacity = capacity
        self.sample = sample
        self.threshold, self.foreign, self.attempts = threshold, foreign, max(1, attempts)
        self.keep, self.duration, self.progress = keep, duration, progress

    def __call__(
        self, arms: Sequence[Arm], *, reps: int, seed: int, arrivals: Arrivals | None = None
    ) -> list[Condition]:
        """Every kept arm over ``reps`` paired reps, one arm at a time (in a fresh event loop)."""
        return asyncio.run(self.arun(arms, reps=reps, seed=seed, arrivals=arrivals))

    async def arun(
        self, arms: Sequence[Arm], *, reps: int, seed: int, arrivals: Arrivals | None = None
    ) -> list[Condition]:
        """As `__call__`, in the running event loop."""
        out = []
        for arm in arms:
            if not self.keep(arm):
                continue
            if self.duration is not None:
                arm = dataclasses.replace(arm, load={**arm.load, "duration": self.duration})
            out.append(await self._arm(arm, reps, seed, arrivals))
            self.finished(out[-1])
        return out

    async def _arm(self, arm: Arm, reps: int, seed: int, arrivals: Arrivals | None) -> Condition:
        """One arm, redone while contended (up to ``attempts``); the last attempt is kept."""
        tries: list[dict[str, Any]] = []
        for attempt in range(self.attempts):
            before = self.sample()
            mu = float(await self.capacity())
            k = scale_from_capacity(mu)
            self.live.scale = k
            self.live.info.update(time_scale=k, path_capacity=mu)
            [cond] = await self.live.arun([arm], reps=reps, seed=seed, arrivals=arrivals)
            load = machine_load(before, self.sample())
            mark = contended(load, threshold=self.threshold, foreign=self.foreign)
            tries.append({"path_capacity": round(mu, 3), **load, "contended": mark})
            self.progress(f"{arm.params}: attempt {attempt + 1} k {k:.3f} {load} contended={mark}")
            if not mark:
                break
        protocol = {
            **tries[-1],
            "attempts": len(tries),
            "attempt_loads": tries,
            "threshold": self.threshold,
            "foreign_bound": self.foreign,
        }
        if self.duration is not None:
            protocol["duration"] = self.duration
        return Condition(cond.params, cond.runs, {**cond.info, **protocol})


def corner(
    contract: Contract,
    *,
    reps: int = 10,
    seed: int = 0,
    runner: Runner | None = None,
    opp_rates: Sequence[float] = CORNER_OPP_RATES,
) -> ExperimentResult:
    """The B = C cell (floor = slots, the contract's deadline, paced at B/W): guarded at each surplus
    rate, unguarded at the highest for contrast. The assured load alone is ρ_eff ≈ 0.42 at the
    saturated service, so the preconditions can hold and a guarded miss is the guard's to explain."""
    require_roles(contract, "corner")
    base = with_floored(contract, floor=contract.slots)
    arms = [
        Arm(
            {"floor": contract.slots, "opp_rate": opp, "arm": name, "guard": name == "guard"},
            base,
            {"mode": "guarded" if name == "guard" else "unguarded", "learner": "admit-all"},
            {"assured_rate": floor_rate(base), "opp_rate": opp},
        )
        for opp in opp_rates
        for name in ("guard", "unguarded")
        if name == "guard" or opp == max(opp_rates)
    ]
    conditions = (runner or run_arms)(arms, reps=reps, seed=seed)
    return ExperimentResult("corner", tuple(conditions), (), x_key="opp_rate", group_keys=("arm",))
