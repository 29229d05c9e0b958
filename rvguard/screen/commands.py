"""The commands this package brings to ``rvguard`` (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (
    (
        "screen",
        "rvguard.screen.cli",
        "predict the assured P95 sojourn and accept/reject (screen, not a guarantee)",
    ),
    (
        "screen-eval",
        "rvguard.screen.eval_cli",
        "evaluate the P95 screen's accept verdict against simulated outcomes (precision, recall)",
    ),
)

#: commands that also run as ``rvguard experiment NAME``
EXPERIMENTS = ("screen-eval",)
