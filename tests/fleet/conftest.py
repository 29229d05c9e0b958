"""A real Redis for the fleet tests: `redis-server` on 127.0.0.1, on a port the OS picked.

`make redis` (part of `make test`) installs Debian's ``redis-server`` when it
is missing. If the binary is absent anyway, every test that needs it FAILS
with how to install it: it never skips. Redis cannot listen on port 0 and
report the port, so the fixture asks the OS for a free port first and
retries with another if Redis lost the race for it. The server keeps no
state on disk (no snapshots, no AOF): a restart is a store that lost its
state, which is the fault the pool must survive.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.conftest import NEEDS, Engine, EnginePool, kills, restart_after

SERVER = os.environ.get("RVGUARD_REDIS_SERVER", "redis-server")
READY_TIMEOUT = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One `redis-server` process: start, kill, restart on the same port, pause, resume."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start on a fresh free port (three tries), or on the current one after `kill`."""
        for _ in range(3):
            if not self.port:
                self.port = _free_port()
            if self._launch():
                return
            self.port = 0
        pytest.fail(f"redis-server did not come up:\n{self._log_tail()}", pytrace=False)

    def _launch(self) -> bool:
        binary = shutil.which(SERVER)
        if binary is None:
            pytest.fail(
                f"{SERVER} not found: run `make redis` (Debian: apt-get install redis-server) "
                "or set RVGUARD_REDIS_SERVER",
                pytrace=False,
            )
        cmd = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        cmd += ["--dir", str(self.workdir), "--maxmemory-policy", "noeviction"]
        with open(self.workdir / "redis.log", "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if _answers(self.port):
                return True
            time.sleep(0.02)
        self.kill()
        return False

    def _log_tail(self) -> str:
        try:
            return "\n".join((self.workdir / "redis.log").read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL (after SIGCONT, in case it is paused) and reap."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(timeout=10)

    def restart(self) -> None:
        """Kill, then start again on the same port (all state lost)."""
        self.kill()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: the port still accepts connections but nothing answers (a partition)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT: what queued up while paused now runs."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def flush(self) -> None:
        """FLUSHALL, over a raw socket (a store that lost its state without a restart)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2.0) as s:
            s.sendall(b"FLUSHALL\r\n")
            assert s.recv(16).startswith(b"+OK")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real Redis for the session (tests that break it restart it themselves)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis, running and emptied for this test."""
    if redis_server.proc is None or redis_server.proc.poll() is not None:
        redis_server.start()
    redis_server.resume()
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def two_engines(engine_pool: EnginePool, request: pytest.FixtureRequest) -> Iterator[list[Engine]]:
    """The pool's two keyed engines, each running. One that a test killed is started again in the
    background right after it when a later test needs it (the tests that kill one are marked
    ``kills_engine`` and run at the end of the session, so that the last kill costs no restart)."""
    yield engine_pool.use(*NEEDS["two_engines"], beside_starts=kills(request))
    restart_after(engine_pool, request)
