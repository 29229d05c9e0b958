"""rvguard's floor in front of a real LiteLLM proxy (``.venv-litellm``, built by ``make litellm``).

A LiteLLM proxy process with rvguard's callback routes to the fake upstream (C = 2 slots, slow
tokens); assured and opportunistic tenants flood it. The floor holds: every request that an
independent count finds entitled is admitted and served; the proxy never has more than C calls at
the upstream; the trace the callback wrote passes ``rvguard check``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rvguard.gateway.fake import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("RVGUARD_LITELLM_VENV", ROOT / ".venv-litellm"))
MASTER = "sk-litellm-master-test"
KEYS = {"sk-gold": "gold", "sk-bulk": "bulk"}
FLOOR, WINDOW, SLOTS = 2, 1.0, 2

CONTRACT: dict[str, Any] = {
    "epoch": 0.0,
    "window": WINDOW,
    "slots": SLOTS,
    "output_cap": 8,
    "excess": "reject",
    "credit": "count",
    "service": {"s_max": 0.5, "s_max_opp": 0.5, "lower": 0.001, "upper": None},
    "tenants": {
        "gold": {"floor": FLOOR, "deadline": 3.0, "tier": 0},
        "bulk": {"floor": 0, "deadline": 60.0, "tier": 1},
    },
}


#: `make test` names here the file `make litellm` writes when its install ends (passed or not): the
#: tests start without waiting for that install, and this one waits for it (see the Makefile)
INSTALL_AFTER = "RVGUARD_LITELLM_AFTER"


def _python() -> Path:
    python = VENV / "bin" / "python"
    _wait_for_install(os.environ.get(INSTALL_AFTER), timeout=900.0)
    if not (VENV / ".rvguard-ready").exists():
        pytest.fail(f"{VENV} is missing: `make litellm` builds it (see build/litellm_env.log)", pytrace=False)
    return python


def _wait_for_install(after: str | None, *, timeout: float) -> None:
    """Until ``after`` exists (the install has ended), when one is named; fails after ``timeout`` s."""
    if not after:
        return
    deadline = time.monotonic() + timeout
    while not Path(after).exists():
        if time.monotonic() > deadline:
            why = f"`make litellm` did not end within {timeout:.0f} s ({after} is missing)"
            pytest.fail(why, pytrace=False)
        time.sleep(0.5)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _proxy(tmp: Path, upstream: str) -> AsyncIterator[tuple[str, Path]]:
    """A LiteLLM proxy process with rvguard's callback and custom auth; yields (url, trace)."""
    spec, keys, trace, config = (
        tmp / "contract.yaml",
        tmp / "keys.yaml",
        tmp / "trace.jsonl",
        tmp / "config.yaml",
    )
    spec.write_text(yaml.safe_dump(CONTRACT))
    keys.write_text(yaml.safe_dump({"keys": KEYS}))
    config.write_text(
        yaml.safe_dump(
            {
                "model_list": [
                    {
                        "model_name": "tiny",
                        "litellm_params": {
                            "model": "openai/fake",
                            "api_base": upstream + "/v1",
                            "api_key": "none",
                        },
                    }
                ],
                "litellm_settings": {
                    "callbacks": "rvguard.integrations.litellm_proxy.handler",
                    "num_retries": 0,
                },
                "general_settings": {
                    "master_key": MASTER,
                    "custom_auth": "rvguard.integrations.litellm_proxy.user_api_key_auth",
                },
            }
        )
    )
    port = _port()
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "RVGUARD_CONTRACT": str(spec),
        "RVGUARD_KEYS": str(keys),
        "RVGUARD_TRACE": str(trace),
    }
    cmd = [
        str(_python().parent / "litellm"),  # fails the test while the install is missing: no log opened
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    log = (tmp / "litellm.log").open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(600):  # ≤ 60 s: the proxy's imports are heavy
                if proc.poll() is not None:
                    pytest.fail(f"the LiteLLM proxy exited:\n{(tmp / 'litellm.log').read_text()[-3000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url + "/health/liveliness", timeout=1.0)).status_code == 200:
                        break
                await asyncio.sleep(0.1)
        yield url, trace
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


async def _ask(client: httpx.AsyncClient, url: str, key: str, stream: bool) -> int:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 50}
    headers = {"authorization": f"Bearer {key}"}
    if not stream:
        return (await client.post(url + "/v1/chat/completions", json=body, headers=headers)).status_code
    async with client.stream(
        "POST", url + "/v1/chat/completions", json={**body, "stream": True}, headers=headers
    ) as answer:
        async for _ in answer.aiter_bytes():
            pass
        return answer.status_code


def _entitled(events: list[dict[str, Any]]) -> set[str]:
    """The gold arrivals among the first FLOOR of their window (written from DESIGN §1, not rvguard)."""
    seen: Counter[int] = Counter()
    entitled = set()
    for ev in events:
        if ev["kind"] == "arrive" and ev["tenant"] == "gold":
            k = int(ev["t"] // WINDOW)
            seen[k] += 1
            if seen[k] <= FLOOR:
                entitled.add(ev["rid"])
    return entitled


async def test_the_floor_holds_in_front_of_a_litellm_proxy(tmp_path: Path) -> None:
    upstream = FakeUpstream(slots=None, token_delay=0.02)
    await upstream.start()
    try:
        async with _proxy(tmp_path, upstream.url) as (url, trace), httpx.AsyncClient(timeout=30.0) as client:
            statuses: list[tuple[str, int]] = []

            async def one(key: str, stream: bool) -> None:
                statuses.append((KEYS[key], await _ask(client, url, key, stream)))

            assert await _ask(client, url, "sk-unknown", False) == 401
            for burst in range(3):  # 3 gold and 8 bulk at once, three times
                jobs = [one("sk-gold", i % 2 == 0) for i in range(3)] + [
                    one("sk-bulk", i % 2 == 1) for i in range(8)
                ]
                await asyncio.gather(*jobs)
                await asyncio.sleep(0.3 * burst)
    finally:
        await upstream.close()
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert events[0]["kind"] == "segment"  # the gateway's trace file: a header, then the events
    events = [e for e in events[1:] if "rid" in e]  # node records (the watch's alerts, stalls) have none
    by_rid: dict[str, list[str]] = {}
    for ev in events:
        by_rid.setdefault(ev["rid"], []).append(ev["kind"])
    entitled = _entitled(events)
    assert len(entitled) >= FLOOR * 2
    for rid in entitled:  # every entitled request admitted on the floor and served
        assert by_rid[rid][:2] == ["arrive", "admit"] and by_rid[rid][-1] == "complete", by_rid[rid]
    assert upstream.max_active <= SLOTS  # the proxy's calls went through the Guard's C slots
    assert all(body["max_tokens"] <= CONTRACT["output_cap"] for body in upstream.bodies)  # cap forced
    gold = Counter(s for tenant, s in statuses if tenant == "gold")
    gold_arrivals = sum(1 for ev in events if ev["kind"] == "arrive" and ev["tenant"] == "gold")
    assert gold[200] == len(entitled) and gold[429] == gold_arrivals - len(entitled)  # excess refused
    assert all(s == 200 for tenant, s in statuses if tenant == "bulk")  # surplus admitted, queued
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "rvguard.cli",
            "check",
            str(trace),
            "--contract",
            str(tmp_path / "contract.yaml"),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    # 0: everything holds. 3: no guard fault, but a service ran above s_max (a loaded machine slows
    # the proxy and the fake engine alike: a broken precondition, which the check attributes and
    # this test is not about); then every SF miss must be so attributed and no refusal undeclared.
    assert check.returncode in (0, 3), check.stdout[-4000:] + check.stderr
    report = json.loads(check.stdout)
    assert report["holds"] and report["violations"] == [] and report["sf_attribution"]["guard_fault"] == 0
    causes = {(a["property"], a["cause"]) for a in report["attributed"]}
    assert causes <= {("SF", "precondition")} and (check.returncode == 0) == (not causes), causes


def test_the_wait_for_the_install_ends_when_it_does_and_fails_past_its_time(tmp_path: Path) -> None:
    """`make test` starts this file's test beside LiteLLM's install: it waits for the install's end."""
    done = tmp_path / "litellm.done"
    threading.Timer(0.3, done.touch).start()
    t0 = time.monotonic()
    _wait_for_install(str(done), timeout=30.0)
    assert done.exists() and time.monotonic() - t0 >= 0.25
    _wait_for_install(None, timeout=0.0)  # no install named: nothing to wait for
    with pytest.raises(pytest.fail.Exception, match="did not end within"):
        _wait_for_install(str(tmp_path / "never"), timeout=0.2)
