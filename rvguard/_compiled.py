"""The compiled build (issues 16, 30): which modules mypyc compiles, and how to run without them.

Why: the hot paths (the online monitor's engine, the decision core, the simulator's loop) are
plain, ``mypy --strict`` Python; mypyc compiles the same source into extension modules that sit
next to the ``.py`` files in every *non-editable* install made where a C compiler works (``pip
install .``; ``RVGUARD_COMPILE=0`` builds pure Python: see ``setup.py``). One source, two ways to
run it: with ``RVGUARD_PURE=1`` in the environment ``rvguard`` puts `PureFinder` first on
``sys.meta_path``, so every ``rvguard`` module is loaded from its ``.py`` source even where an
extension module shadows it. An editable install (``pip install -e``) never compiles, so edits to
the sources always take effect.

A checkout runs compiled through a tree built beside it (``make compiled``: the default wheel,
unpacked into ``build/compiled``): ``RVGUARD_COMPILED_TREE=<tree>`` makes `use_tree` put
`TreeFinder` first, which loads each listed module's extension from the tree and everything else
from the checkout. The tree must have been built from the sources the checkout holds now: a listed
module whose source differs from the tree's copy is an `ImportError` naming it (a stale extension
would run code that is no longer there). ``make demo``, ``make test`` and ``make bench`` run so.

Stdlib only: imported by ``rvguard/__init__.py`` before anything else.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = [
    "COMPILED",
    "NOTE",
    "TREE_VARIABLE",
    "PureFinder",
    "TreeFinder",
    "build",
    "checkout",
    "compiled_modules",
    "force_pure",
    "use_tree",
]

#: the file that a non-editable pure build leaves beside this module, saying why it did not compile
#: (written by ``setup.py``; absent from a source checkout and from a compiled install)
NOTE = "_pure_build.txt"
#: the environment variable naming a compiled tree for a checkout to run (`use_tree`)
TREE_VARIABLE = "RVGUARD_COMPILED_TREE"

#: the modules mypyc compiles (paths from the repository root); everything else stays interpreted.
#: The Guard (`rvguard.enforce.guard`, the asyncio edge every request passes) is compiled too: its
#: coroutines run as native generators.
#: The event records (`events`), `Request` and `LoadView` are native classes there, each with its
#: ``__init__`` written out so that it is compiled (`rvguard._record`).
#: Left out on purpose: modules of pydantic models (`rvguard.contract`: mypyc cannot compile them;
#: `Entitlement`, on every arrival's path, has its own module for this reason),
#: and dataclasses whose annotations name types imported only for the type checker (mypyc evaluates
#: them at import: `rvguard.monitors.metrics`, whose accumulator is `accounting`, and `rvguard.fact_columns`,
#: split from `facts`, for this reason), and classes others subclass in interpreted code (an
#: interpreted class cannot subclass a native one): `Proposal` and the learner failures
#: (`rvguard.proposal`), the learners themselves (`rvguard.enforce.learners`; the checks of their
#: answers, on every arrival's path, are `rvguard.enforce.answers`). `rvguard.runbook_events` stays
#: interpreted: `Sample`'s ``rid`` is a class attribute, which mypyc would hand over as a field.
COMPILED: tuple[str, ...] = (
    "rvguard/lifecycle.py",
    "rvguard/exact.py",
    "rvguard/events.py",
    "rvguard/entitlement.py",
    "rvguard/facts.py",
    "rvguard/monitors/automaton.py",
    "rvguard/monitors/accounting.py",
    "rvguard/monitors/product.py",
    "rvguard/monitors/monitor.py",
    "rvguard/enforce/request.py",
    "rvguard/enforce/answers.py",
    "rvguard/enforce/transitions.py",
    "rvguard/enforce/ready.py",
    "rvguard/enforce/rids.py",
    "rvguard/enforce/demotion.py",
    "rvguard/enforce/relief.py",
    "rvguard/enforce/watching.py",
    "rvguard/enforce/watch.py",
    "rvguard/enforce/core.py",
    "rvguard/enforce/guard.py",
    "rvguard/sim/backend.py",
    "rvguard/sim/engine.py",
)


class PureFinder(importlib.abc.MetaPathFinder):
    """Finds ``rvguard`` modules as ``.py`` sources only (an extension module beside one is ignored)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """The source spec of an ``rvguard.*`` module, else ``None`` (the other finders decide)."""
        if not fullname.startswith("rvguard.") or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            package = os.path.join(entry, leaf, "__init__.py")
            if os.path.isfile(package):
                where = [os.path.dirname(package)]
                spec = importlib.util.spec_from_file_location
                return spec(fullname, package, submodule_search_locations=where)
            module = os.path.join(entry, leaf + ".py")
            if os.path.isfile(module):
                return importlib.util.spec_from_file_location(fullname, module)
        return None


class TreeFinder(importlib.abc.MetaPathFinder):
    """Finds the listed modules, and mypyc's shared library, as extension modules in ``tree``."""

    def __init__(self, tree: str, names: frozenset[str]) -> None:
        self.tree = tree
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """The extension's spec for a listed module or ``*__mypyc``, else ``None``."""
        if fullname not in self.names and not (path is None and fullname.endswith("__mypyc")):
            return None
        where = os.path.join(self.tree, *fullname.split("."))
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if os.path.isfile(where + suffix):
                return importlib.util.spec_from_file_location(fullname, where + suffix)
        return None


def use_tree(tree: str) -> None:
    """Run the listed modules from the compiled tree ``tree`` (module doc), the rest from here.

    Only a checkout (``pyproject.toml`` beside the package) uses a tree: an installed package runs
    its own build whatever the environment says. A tree built pure (no C compiler where it was
    built) holds no extension: nothing changes, and `build` says so. Raises `ImportError` when the
    tree is missing, partly compiled, or built from other sources than this checkout's.
    """
    here, there = os.path.dirname(os.path.dirname(__file__)), os.path.abspath(tree)
    if any(isinstance(f, TreeFinder) for f in sys.meta_path) or not checkout(here):
        return
    if not os.path.isdir(os.path.join(there, "rvguard")):
        raise ImportError(f"{TREE_VARIABLE}={tree}: no compiled tree there (make compiled builds it)")
    found, stale = [], []
    for path in COMPILED:
        base = os.path.join(there, path.removesuffix(".py"))
        found.append(any(os.path.isfile(base + s) for s in importlib.machinery.EXTENSION_SUFFIXES))
        with open(os.path.join(here, path), "rb") as mine, open(os.path.join(there, path), "rb") as built:
            if mine.read() != built.read():
                stale.append(path)
    if not any(found):
        return
    if not all(found) or stale:
        why = f"built from other sources ({', '.join(stale)})" if stale else "not every module compiled"
        raise ImportError(f"{TREE_VARIABLE}={tree}: {why}; make compiled rebuilds it")
    names = frozenset(p.removesuffix(".py").replace("/", ".") for p in COMPILED)
    sys.meta_path.insert(0, TreeFinder(there, names))


def checkout(root: str) -> bool:
    """Whether ``root`` (the folder holding the ``rvguard`` package) is a source checkout."""
    return os.path.isfile(os.path.join(root, "pyproject.toml"))


def force_pure() -> None:
    """Load every ``rvguard`` module imported from now on from source (idempotent)."""
    if not any(isinstance(f, PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PureFinder())


def build() -> str:
    """Which build runs: ``compiled (N modules)`` when the listed modules load from extension
    modules, else ``pure Python``, with the reason when ``RVGUARD_PURE`` forced it or when the
    install did not compile (``setup.py`` leaves its reason in `NOTE` beside this module)."""
    import importlib.util

    if any(isinstance(f, PureFinder) for f in sys.meta_path):
        return "pure Python (RVGUARD_PURE=1)"
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    compiled = 0
    for path in COMPILED:
        name = path.removesuffix(".py").replace("/", ".")
        spec = importlib.util.find_spec(name)
        compiled += spec is not None and (spec.origin or "").endswith(suffixes)
    if compiled:
        return f"compiled ({compiled} modules)"
    tree = os.environ.get(TREE_VARIABLE)
    if not (tree and checkout(os.path.dirname(os.path.dirname(__file__)))):
        tree = None
    note = os.path.join(tree, "rvguard", NOTE) if tree else os.path.join(os.path.dirname(__file__), NOTE)
    if os.path.isfile(note):
        with open(note, encoding="utf-8") as file:
            return f"pure Python (not compiled at install: {file.read().strip()})"
    return "pure Python"


def compiled_modules() -> list[str]:
    """The ``rvguard`` modules loaded so far from extension modules (empty when running pure)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return sorted(
        name
        for name, mod in list(sys.modules.items())
        if name.startswith("rvguard") and (getattr(mod, "__file__", None) or "").endswith(suffixes)
    )
