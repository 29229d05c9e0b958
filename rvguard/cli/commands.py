"""The commands whose library is on the ground floor (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (("check", "rvguard.cli.check", "judge a recorded trace against a contract"),)
