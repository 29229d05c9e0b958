"""Shared fixtures: contracts from specs/, the shared real-trace folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from rvguard.contract import Contract, load_contract
from rvguard.data import TRACES as BUNDLED_TRACES

# Hypothesis judges properties, not speed: speed lives in benchmarks/. On a shared, loaded machine
# (CI's included) a per-example deadline or a slow-generation health check fails a correct test.
settings.register_profile("rvguard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rvguard")

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
TRACES = BUNDLED_TRACES  # the public trace slices rvguard ships (rvguard/data/traces)
SHARED_TRACES = TRACES  # their old name, from when they lived in ../shared/data/traces


@pytest.fixture
def marquee() -> Contract:
    return load_contract(SPECS / "marquee.yaml")


@pytest.fixture
def two_tenants() -> Contract:
    return load_contract(SPECS / "two_tenants.yaml")


#: the session fixtures that start the real vLLM CPU engine (tests/gateway, tests/fleet conftest)
ENGINE_FIXTURES = frozenset({"engine", "two_engines", "engine_pair", "small_kv_engine"})


#: the folders `make unit-engine` collects (the Makefile's ENGINE_DIRS): an engine test elsewhere fails
#: the run, so that no engine test is left out of `make test` unnoticed
ENGINE_DIRS = ("tests/fleet", "tests/gateway")

#: the slowest files of the tests that need no engine, measured on a clean clone, slowest first:
#: `make unit-fast` (with --no-loadscope-reorder) hands them to the xdist workers before the rest, so
#: that no long file starts last and runs alone at the end
SLOW_FIRST: tuple[str, ...] = (
    "tests/test_compiled.py",  # builds the mypyc extension: minutes, and collected last of all
    "tests/test_packaging.py",  # builds an sdist and a wheel and installs it in a fresh venv
    "tests/fleet/test_gateway_fleet.py",  # replicas over Redis, several contract windows a test
    "tests/integrations/test_litellm_proxy.py",  # LiteLLM's proxy started in its own venv
    "tests/test_docs.py",  # the mkdocs --strict build
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use the real engine ``engine``: `make unit` runs them apart, one at a
    time after the rest, since they pin CPUs and measure latency (and each xdist worker would
    otherwise start its own engine). Then put the known slow files first (a stable sort)."""
    strays = []
    for item in items:
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())) or item.path.name.endswith("_vllm.py"):
            item.add_marker(pytest.mark.engine)
            if not item.path.is_relative_to(ROOT) or not _in_engine_dirs(item.path.relative_to(ROOT)):
                strays.append(item.nodeid)
    if strays:
        raise pytest.UsageError(
            f"engine tests outside ENGINE_DIRS {ENGINE_DIRS} (tests/conftest.py, Makefile): {strays}"
        )
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(_relative(item.path), len(rank)))
    _kills_last(items)


def _kills_last(items: list[pytest.Item]) -> None:
    """Move each ``kills_engine`` test after the last test of its folder (where its engine fixture's
    scope ends), so that the engine it kills is restarted for no one."""
    for item in [i for i in items if i.get_closest_marker("kills_engine")]:
        items.remove(item)
        last = max((n for n, other in enumerate(items) if other.path.parent == item.path.parent), default=-1)
        items.insert(last + 1, item)


def _in_engine_dirs(path: Path) -> bool:
    return any(path.is_relative_to(folder) for folder in ENGINE_DIRS)


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/goldens/ from the current code (see tests/test_goldens.py)",
    )
