"""The commands this package brings to ``rvguard`` (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (
    ("experiment", "rvguard.study.cli:Experiment", "regenerate one of the reference study's experiments"),
    (
        "reproduce",
        "rvguard.study.reproduce_cli",
        "run every experiment and write the study-vs-simulator-vs-engine table (reproduction.md)",
    ),
)

#: commands that also run as ``rvguard experiment NAME``
EXPERIMENTS = ("reproduce",)
