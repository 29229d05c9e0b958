"""Shared fixtures: contracts from specs/, the shared real-trace folder."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


#: `make test` and `make unit` name here the file `make unit-fast` writes when it ends: the engine
#: session then starts its engines at once, niced (as root, the one who may bring them back), and
#: its first test waits for that file. The engines come up in the idle time of unit-fast's waiting
#: files instead of after them, and no engine test runs beside unit-fast.
ENGINE_AFTER = "RVGUARD_ENGINE_AFTER"
_EARLY_POOL = pytest.StashKey[Any]()


def _new_pool(session: pytest.Session, where: Path, *, nice: int = 0) -> Any:
    """An `EnginePool` with every engine the collected tests name started (in the background)."""
    import sys

    from tests.gateway.conftest import NEEDS, EnginePool, ensure_env

    if not sys.platform.startswith("linux"):
        pytest.fail("the vLLM CPU engine tests need Linux", pytrace=False)
    ensure_env()
    pool = EnginePool(where, nice=nice)
    used = {f for item in session.items for f in getattr(item, "fixturenames", ())}
    pool.start(*sorted({n for f in used & NEEDS.keys() for n in NEEDS[f]}))
    return pool


def pytest_collection_finish(session: pytest.Session) -> None:
    """With ``RVGUARD_ENGINE_AFTER`` and engine tests collected: start the engines now, then wait
    (outside any test's time-out) until the file exists (see `ENGINE_AFTER`)."""
    after = os.environ.get(ENGINE_AFTER)
    if not after or not any(item.get_closest_marker("engine") for item in session.items):
        return
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]  # the session's tmp_path_factory
    pool = None
    try:
        pool = _new_pool(session, factory.mktemp("vllm"), nice=19 if os.geteuid() == 0 else 0)
        session.config.stash[_EARLY_POOL] = pool
    except (OSError, pytest.fail.Exception) as err:  # the fixture fails the tests with it
        print(f"\nengine tests: the engines could not be started early ({err}); the first test will try")
    t0, done = time.monotonic(), Path(after)
    print(f"\nengine tests: engines starting; waiting for {done} (the tests that need no engine) ...")
    while not done.exists():
        if time.monotonic() - t0 > 3600:
            pytest.exit(f"engine tests: {done} did not appear within an hour", returncode=1)
        time.sleep(0.5)
    if pool is not None:
        pool.unnice()
    print(f"engine tests: waited {time.monotonic() - t0:.0f} s; the engines run at niceness 0 from here")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The early engines killed whatever ended the session (an interrupted wait included: they run in
    sessions of their own, which a Ctrl-C does not reach)."""
    pool = session.config.stash.get(_EARLY_POOL, None)
    if pool is not None:
        pool.close()


@pytest.fixture(scope="session")
def engine_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's real vLLM CPU engines (tests/gateway/conftest.py's `EnginePool`), each started once:
    every one the collected tests name starts, side by side, when the first engine test begins, or
    earlier (`pytest_collection_finish`). Fails loudly when they cannot."""
    early = request.config.stash.get(_EARLY_POOL, None)
    if early is not None:
        yield early  # closed by `pytest_sessionfinish`
        return
    pool = _new_pool(request.session, tmp_path_factory.mktemp("vllm"))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def marquee() -> Contract:
    return load_contract(SPECS / "marquee.yaml")


@pytest.fixture
def two_tenants() -> Contract:
    return load_contract(SPECS / "two_tenants.yaml")


#: the session fixtures that start the real vLLM CPU engine (tests/gateway, tests/fleet conftest)
ENGINE_FIXTURES = frozenset({"engine_pool", "engine", "two_engines", "small_kv_engine"})


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
    "tests/test_docs.py",  # the mkdocs --strict build
)
#: files that wait for an install `make test` runs beside the tests (LiteLLM's proxy, niced: the
#: Makefile's LITELLM_WAIT): handed out halfway, by when it has ended (about a third of the way in a
#: clean clone), so that no worker idles waiting for it and it does not run alone at the end
HALFWAY: tuple[str, ...] = ("tests/integrations/test_litellm_proxy.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use the real engine ``engine``: `make unit` runs them apart, one at a
    time after the rest, since they pin CPUs and measure latency (and each xdist worker would
    otherwise start its own engine). Then put the known slow files first (a stable sort) and the ones
    that wait for an install halfway."""
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
    _pure_build_apart(items)
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(_relative(item.path), len(rank)))
    _halfway(items)
    _kills_last(items)


def _pure_build_apart(items: list[pytest.Item]) -> None:
    """In a session that runs the compiled tree (``make test``), skip the ``pure_build`` tests: a
    compiled module calls its own functions and native methods directly, past a spy or a patch.
    tests/test_compiled.py runs them pure in a process of their own, so they run all the same."""
    from rvguard._compiled import TREE_VARIABLE, compiled_modules

    if not os.environ.get(TREE_VARIABLE):
        return
    import rvguard.enforce.core  # noqa: F401 - a listed module: loaded compiled when the tree is used

    if not compiled_modules():
        return  # a tree built pure (no C compiler): the session runs pure, the spies see every call
    skip = pytest.mark.skip(
        reason="pure_build: run pure by tests/test_compiled.py (compiled code skips spies)"
    )
    for item in items:
        if item.get_closest_marker("pure_build"):
            item.add_marker(skip)


def _halfway(items: list[pytest.Item]) -> None:
    """Move the `HALFWAY` files' tests to the middle of the session (by test count)."""
    moved = [i for i in items if _relative(i.path) in HALFWAY]
    if moved:
        rest = [i for i in items if _relative(i.path) not in HALFWAY]
        items[:] = rest[: len(rest) // 2] + moved + rest[len(rest) // 2 :]


def _kills_last(items: list[pytest.Item]) -> None:
    """Move each ``kills_engine`` test to the end of the session, ordered by the marker's ``order``
    (then as collected): the engines are the session's (`engine_pool`), so an engine killed earlier
    would be restarted for the tests after it."""
    kills = [i for i in items if i.get_closest_marker("kills_engine")]
    kills.sort(key=lambda i: i.get_closest_marker("kills_engine").kwargs.get("order", 0))  # type: ignore[union-attr]
    items[:] = [i for i in items if not i.get_closest_marker("kills_engine")] + kills


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
