"""The commands whose library is on the ground floor (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (
    ("check", "rvguard.cli.check", "judge a recorded trace against a contract"),
    ("schema", "rvguard.cli.schema", "print the JSON Schema of a contract (or of a trace record)"),
)
