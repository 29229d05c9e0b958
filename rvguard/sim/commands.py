"""The commands this package brings to ``rvguard`` (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (
    ("simulate", "rvguard.sim.cli:Simulate", "simulate a workload under the guard (or a baseline)"),
    ("experiment", "rvguard.sim.cli:Experiment", "regenerate one of the reference study's experiments"),
    ("demo", "rvguard.sim.cli:Demo", "the beta-sweep (10 reps a condition) and an honest summary"),
    (
        "reproduce",
        "rvguard.sim.reproduce_cli",
        "run every experiment and write the study-vs-simulator-vs-engine table (reproduction.md)",
    ),
)

#: commands that also run as ``rvguard experiment NAME``
EXPERIMENTS = ("reproduce",)
