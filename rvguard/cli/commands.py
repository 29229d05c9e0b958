"""The commands whose library is on the ground floor (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (
    ("check", "rvguard.cli.check", "judge a recorded trace against a contract"),
    ("init", "rvguard.cli.init", "write a commented starter contract and keys file (--examples: specs/)"),
    ("review", "rvguard.cli.review", "how often each fixed parameter proved wrong in a trace, at what cost"),
    ("schema", "rvguard.cli.schema", "print the JSON Schema of a contract (or of a trace record)"),
)
