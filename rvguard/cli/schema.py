"""``rvguard schema [contract|trace]``: a file format's JSON Schema, for editors and validators."""

from __future__ import annotations

import argparse
import json

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard schema``."""
    p.add_argument(
        "format", nargs="?", choices=("contract", "trace"), default="contract", help="default: contract"
    )


def run(args: argparse.Namespace) -> bool:
    """Print the schema as JSON on stdout."""
    from ..schema import contract_schema, trace_schema

    schema = contract_schema() if args.format == "contract" else trace_schema()
    print(json.dumps(schema, indent=2, ensure_ascii=False))
    return True
