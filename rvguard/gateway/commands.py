"""The commands this package brings to ``rvguard`` (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (
    (
        "serve",
        "rvguard.gateway.cli:Serve",
        "run the guarded OpenAI-compatible gateway in front of an upstream",
    ),
    (
        "calibrate",
        "rvguard.gateway.cli:Calibrate",
        "measure an upstream's service times and suggest an envelope",
    ),
)
