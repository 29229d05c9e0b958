"""The commands this package brings to ``rvguard`` (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (
    ("simulate", "rvguard.sim.cli:Simulate", "simulate a workload under the guard (or a baseline)"),
    ("experiment", "rvguard.sim.cli:Experiment", "regenerate one of the reference study's experiments"),
    ("demo", "rvguard.sim.cli:Demo", "the beta-sweep (40 reps a condition) on the embedded simulator"),
)
