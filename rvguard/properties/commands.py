"""The command-line faces of property tables: ``rvguard verify --properties FILE`` and the tables
``rvguard check --property FILE`` and ``rvguard serve --property FILE`` load.

``builtin`` names the built-in tables (WF, AF, DR, RB, CAP, PR, SF) in place of a file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TextIO

from .builtin import BUILTIN
from .load import load_properties
from .table import PropertyTable

__all__ = ["load_tables", "verify_properties"]


def load_tables(paths: Sequence[str]) -> list[PropertyTable]:
    """The tables of each file (``builtin``: the built-in ones), in order.

    Raises:
        SpecError: an unreadable or invalid file (``file:line: field: message``), or a name given twice.
    """
    from ..errors import SpecError

    out: list[PropertyTable] = []
    for path in paths:
        out += list(BUILTIN.values()) if path == "builtin" else load_properties(path)
    seen: set[str] = set()
    for t in out:
        if t.name in seen:
            raise SpecError(f"property {t.name!r} given twice", field="properties", value=t.name)
        seen.add(t.name)
    return out


def verify_properties(paths: Sequence[str], *, as_json: bool = False, out: TextIO | None = None) -> bool:
    """Run every table's Z3 obligations and the conflicts between them; True when all hold."""
    from .obligations import all_hold, verify_tables

    out = sys.stdout if out is None else out
    tables = load_tables(paths)
    results = verify_tables(tables)
    if as_json:
        print(
            json.dumps({"obligations": [r.to_json() for r in results]}, ensure_ascii=False, indent=2),
            file=out,
        )
        return all_hold(results)
    failed = [r for r in results if not r.holds]
    names = ", ".join(t.name for t in tables)
    head = (
        f"{len(failed)} of {len(results)} obligations fail"
        if failed
        else f"all {len(results)} obligations hold"
    )
    print(f"properties {names}: {head}", file=out)
    for r in results:
        print(f"  {'ok  ' if r.holds else 'FAIL'}  {r.table}: {r.name}: {r.message}", file=out)
        if not r.holds and r.counterexample:
            shown = ", ".join(f"{k}={v}" for k, v in r.counterexample.items())
            print(f"        counterexample: {shown}", file=out)
    return all_hold(results)
