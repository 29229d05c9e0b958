"""The commands this package brings to ``rvguard`` (read by `rvguard.cli.registry`; imports nothing)."""

COMMANDS = (("verify", "rvguard.verify.cli", "check a contract's preconditions with Z3"),)
