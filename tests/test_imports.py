"""The import graph: no cycle between modules, no floor importing a higher one (docs/design.md).

Read from the source with an AST walk, so an import inside a function counts
like one at the top (STYLE 23: not even lazily). Imports under ``if
TYPE_CHECKING:`` do not run: the floors leave them out, but the graph with them
must still have no cycle.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "rvguard"

#: each part of rvguard and its floor (docs/design.md, "Floors"); a part may import its own floor and below
FLOORS: dict[str, int] = {
    "_lazy": 0,
    "_record": 0,  # the event records' decorator (stdlib only)
    "_compiled": 0,  # the compiled build's module list and the pure-mode finder (stdlib only)
    "errors": 0,
    "clock": 0,
    "lifecycle": 0,
    "exact": 0,
    "bounds": 0,
    "untrusted": 0,
    "progress": 0,
    "data": 0,
    "contract": 1,
    "entitlement": 1,  # re-exported by contract; its own module so that the compiled build compiles it
    "events": 1,
    "proposal": 1,  # `Proposal` and the learner failures (events and learners re-export them)
    "runbook_events": 1,  # the DESIGN §10 records, which events re-exports
    "watch_events": 1,  # the DESIGN §12 alert record, which events re-exports
    "runbook_spec": 0,  # the contract's DESIGN §10 blocks (below contract, which holds them)
    "verdict": 1,
    "facts": 1,
    "fact_columns": 1,  # `facts` over numpy columns (its own module: the compiled build compiles `facts`)
    "columnar": 1,
    "schema": 1,
    "io": 2,
    "monitors": 2,
    "properties": 2,  # the tables and their compilers (monitor, offline, shield, Z3): below the enforcer
    "enforce": 3,
    "verify": 3,
    "fleet": 3,
    "check": 3,
    "attribution": 2,  # whose miss: the trace's evidence beside the monitors (check reads it)
    "check_parallel": 3,
    "report": 3,
    "review": 3,
    "sim": 4,
    "screen": 5,
    "gateway": 5,
    "study": 6,  # experiments on an engine (gateway) and the claim table (screen): above both
    "cli": 6,
    "integrations": 6,  # hooks into other serving stacks (LiteLLM): on the gateway's trace and the Guard
    "": 6,  # the package itself (`rvguard/__init__.py`): a lazy facade over every part
}

#: modules that must import nothing impure, however indirectly (STYLE 4)
PURE = (
    "rvguard.lifecycle",
    "rvguard.exact",
    "rvguard.events",
    "rvguard.runbook_events",
    "rvguard.watch_events",
    "rvguard.enforce.watching",
    "rvguard.attribution",
    "rvguard.runbook_spec",
    "rvguard.contract",
    "rvguard.verdict",
    "rvguard.facts",
    "rvguard.fact_columns",
    "rvguard.columnar",
    "rvguard.monitors",
    "rvguard.monitors.offline",
    "rvguard.monitors.phase",
    "rvguard.monitors.partition",
    "rvguard.monitors.fold",
    "rvguard.enforce.core",
    "rvguard.enforce.watch",
    "rvguard.enforce.learners",
    "rvguard.enforce.request",
    "rvguard.enforce.rids",
    "rvguard.enforce.eviction",
    "rvguard.enforce.redline",
)
IMPURE = ("asyncio", "z3", "httpx", "starlette", "uvicorn", "subprocess", "pyarrow")  # pydantic loads socket


def _name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _imports(tree: ast.AST, *, typing_too: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run (``typing_too``: those under ``if TYPE_CHECKING:`` as well)."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        typing_only = isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        )
        if typing_only and not typing_too:
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _edges(name: str, path: Path, *, typing_too: bool = False) -> set[str]:
    """The rvguard modules ``name`` imports (``from pkg import mod`` is an edge to pkg.mod)."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in _imports(ast.parse(path.read_text()), typing_too=typing_too):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
            continue
        prefix = base[: len(base) - node.level + 1] if node.level else []
        target = ".".join([*prefix, *([node.module] if node.module else [])])
        out |= {f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names}
    return {m for m in out if m in MODULES}


GRAPH = {name: _edges(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a self-import): Tarjan's."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1 or v in graph[v]:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_the_module_graph_has_no_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_no_cycle_even_through_type_checking_imports() -> None:
    """A module may import a higher one's names for its annotations only through a protocol of its
    own (`rvguard.enforce.host`, `rvguard.entitlement.WindowedFloors`), never by a circle that only
    ``TYPE_CHECKING`` hides."""
    typed = {name: _edges(name, path, typing_too=True) for name, path in MODULES.items()}
    assert _cycles(typed) == []


def test_the_cycle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e"]]


def test_every_part_has_a_floor() -> None:
    assert {_part(m) for m in MODULES} <= set(FLOORS)


def test_no_floor_imports_a_higher_one() -> None:
    """Every module, one test (each offender named with its floor and what it imports)."""
    offenders = []
    for module in sorted(MODULES):
        mine = FLOORS[_part(module)]
        higher = sorted(t for t in GRAPH[module] if FLOORS[_part(t)] > mine)
        if higher:
            offenders.append(f"{module} (floor {mine}) imports {higher}")
    assert offenders == []


#: imports each module named on its command line in a fresh child (a fork of this bare interpreter,
#: one per module: what one module loads never hides another's) and prints what impure ones it loaded
_PROBE = """
import os, sys
impure = sys.argv[1].split(",")
for module in sys.argv[2:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            __import__(module)
            out = ",".join(sorted(m for m in impure if m in sys.modules))
        except BaseException as exc:
            out = "failed to import: " + repr(exc)
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as got:
        print(module, "loads", got.read() or "-")
    os.waitpid(pid, 0)
"""


def _loads(modules: tuple[str, ...]) -> dict[str, str]:
    argv = [sys.executable, "-c", _PROBE, ",".join(IMPURE), *modules]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return dict(line.split(" loads ", 1) for line in out.splitlines())


def test_pure_modules_load_nothing_impure() -> None:
    """Importing a pure module, with everything it pulls in, loads no asyncio, I/O client or z3.

    One interpreter forks a child per module (was: one interpreter per module, one test each).
    """
    loads = _loads(PURE)
    assert sorted(loads) == sorted(PURE)
    assert {m: what for m, what in loads.items() if what != "-"} == {}


def test_the_probe_sees_an_impure_load() -> None:
    assert _loads(("subprocess", "json")) == {"subprocess": "subprocess", "json": "-"}


def test_no_module_is_a_deprecated_alias() -> None:
    """rvguard has had no release under older module names, so none ships as an alias of another."""
    aliases = [
        name
        for name, path in MODULES.items()
        if "sys.modules[__name__] =" in path.read_text() or '"""Deprecated alias' in path.read_text()
    ]
    assert aliases == []


def _floors_in_the_docs() -> dict[str, int]:
    """docs/design.md's "Floors" bullets read back: each part named in a floor's bold lead."""
    text = (PKG.parent / "docs" / "design.md").read_text()
    section = text.split("## Floors", 1)[1].split("\n## ", 1)[0]
    found: dict[str, int] = {}
    for lead in re.findall(r"^\* \*\*(.+?)\*\*", section, flags=re.MULTILINE | re.DOTALL):
        floor = int(re.search(r"\((\d)\)", lead).group(1))  # type: ignore[union-attr]
        for part in re.findall(r"`([^`]+)`", lead):
            found[part] = floor
        if "package `__init__`" in lead:
            found.pop("__init__", None)
            found[""] = floor
    return found


def test_the_docs_state_the_floors_the_test_enforces() -> None:
    """Every part in its floor's bullet of docs/design.md, as in `FLOORS` (the rules, stated)."""
    assert _floors_in_the_docs() == FLOORS
