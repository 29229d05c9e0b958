"""The vLLM CPU engine pinned to its own core, for measurements that must not test the machine.

Why: on two shared cores the engine (API server and engine core), the gateway and the client
starve each other; figures from an unpinned run measure the machine, not the guard (issue 27).
``pinned_engine`` starts the tiny random-weight Llama (``scripts/vllm_env.sh``) with ``taskset -c
CPU`` and one OpenMP thread bound to that CPU, in its own process group (so its processes can be
counted and killed together); ``pin_self`` moves the calling process (gateway and client) to the
other core. Used by ``scripts/engine_protocol.py``, ``scripts/redline_vllm.py`` and
``benchmarks/bench_engine_throughput.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("RVGUARD_VLLM_VENV", ROOT / ".venv-vllm"))
LOCK = Path("/tmp/rvguard-engine.lock")  # one engine run at a time on this machine


@dataclass(frozen=True)
class Running:
    """A started engine: its URL, served model and process group."""

    url: str
    model: str
    pgid: int
    command: tuple[str, ...]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pin_self(cpu: int = 0) -> None:
    """Run this process (and the threads it starts later) on ``cpu`` only."""
    os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def pinned_engine(
    log: Path,
    *,
    venv: Path = VENV,
    cpu: int | None = 1,
    policy: str = "priority",
    slots: int = 4,
    model_args: Sequence[str] = ("--max-model-len", "2048"),
    start_timeout: float = 600.0,
) -> Iterator[Running]:
    """A vLLM CPU server on 127.0.0.1 (``--max-num-seqs slots``, then ``model_args``: a small KV
    cache, say), pinned to ``cpu`` (None: not pinned), under the engine flock (one engine run at a
    time on this machine), killed with its whole process group on exit."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    pin: list[str] = []
    if cpu is not None:
        pin = ["taskset", "-c", str(cpu)]
        env.update(VLLM_CPU_OMP_THREADS_BIND=str(cpu), OMP_NUM_THREADS="1")
    cmd = [
        *pin, str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(venv / "tiny-llama"), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", str(slots),
        "--scheduling-policy", policy, *model_args, "-O0", "--enforce-eager",
    ]  # fmt: skip
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            deadline = time.monotonic() + start_timeout
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"vLLM did not come up (exit {proc.poll()}); see {log}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/v1/models", timeout=2.0).status_code == 200:
                        break
                time.sleep(0.5)
            yield Running(url, "tiny", proc.pid, tuple(cmd))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def main() -> None:
    """Hold a pinned engine until SIGTERM or SIGINT, its URL and process group written to ``--out``
    (so several measurements share one engine start: ``--engine URL --engine-pgid PGID``)."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=str(ROOT / "build" / "pinned-engine.json"))
    p.add_argument("--venv", default=str(VENV))
    p.add_argument("--cpu", type=int, default=1)
    p.add_argument("--policy", default="priority")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with pinned_engine(
        ROOT / "build" / "pinned-engine.log", venv=Path(args.venv), cpu=args.cpu, policy=args.policy
    ) as e:
        Path(args.out).write_text(
            json.dumps({"url": e.url, "model": e.model, "pgid": e.pgid, "command": e.command})
        )
        print(f"engine {e.url} pgid {e.pgid}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1.0)


if __name__ == "__main__":
    main()
