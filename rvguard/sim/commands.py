"""The commands this package brings to ``rvguard`` (read by `rvguard.cli.registry`; imports nothing).

``experiment`` and ``reproduce`` are declared by `rvguard.study.commands`: they can run on a real
engine through the gateway, which sits above this floor.
"""

COMMANDS = (
    ("simulate", "rvguard.sim.cli:Simulate", "simulate a workload under the guard (or a baseline)"),
    ("demo", "rvguard.sim.cli:Demo", "the beta-sweep (10 reps a condition) and an honest summary"),
    (
        "redline-alpha",
        "rvguard.sim.experiments_redline:Command",
        "the redline's alpha: false-trigger probability vs detection lag on a noisy, glitching signal",
    ),
    (
        "relief-livelock",
        "rvguard.sim.experiments_relief:Command",
        "relief under memory pressure: surplus completed, preempt-all vs rationed relief",
    ),
    (
        "relief-eviction",
        "rvguard.sim.experiments_eviction:Command",
        "the eviction channels under memory pressure: the emergency ranking and the crossover",
    ),
)

#: commands that also run as ``rvguard experiment NAME``
EXPERIMENTS = ("redline-alpha", "relief-livelock", "relief-eviction")
