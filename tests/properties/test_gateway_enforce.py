"""A user's own property enforced in the gateway (``rvguard serve --property FILE``): for each of the
three example tables, the same requests break it without the table (``rvguard check --property``
finds it in the trace) and not with it: the client gets 429, a retry header and the property's
name, and the trace holds the table."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import yaml

from rvguard.cli import main
from rvguard.enforce.learners import LoadView
from rvguard.enforce.request import Request
from rvguard.events import Proposal
from rvguard.gateway.fake import FakeUpstream
from rvguard.properties.load import load_properties
from tests.gateway._support import auth, contract, contract_data, gateway, settings

EX = Path(__file__).resolve().parents[2] / "examples" / "properties"
BODY = {"prompt": "x", "max_tokens": 96}


class RejectFirstOpp:
    """Rejects the first request it is asked about (a 429), admits every later one."""

    def __init__(self) -> None:
        self.asked = 0

    def propose(self, request: Request, view: LoadView) -> Proposal:
        self.asked += 1
        return Proposal(admit=self.asked > 1)


def _table(tmp: Path, name: str) -> Path:
    """The example's file; the tokens bound scaled to this contract's 96-token cap (one fits, two do not)."""
    path = EX / name
    if name == "tenant_tokens.yaml":
        path = tmp / name
        path.write_text((EX / name).read_text().replace("params: {T: 4096}", "params: {T: 150}"))
    return path


async def _serve(tmp: Path, name: str, enforced: bool) -> tuple[list[httpx.Response], Path]:
    """Three requests of the unfloored tenant, in flight together (the upstream paused), then served."""
    c, trace = contract(), tmp / f"{name}-{enforced}.jsonl"
    tables = tuple(load_properties(_table(tmp, name))) if enforced else ()
    learner = RejectFirstOpp() if name == "cooldown.yaml" else None
    async with FakeUpstream() as up:
        s = replace(settings(up.url, trace, learner=learner), properties=tables)
        async with gateway(c, s) as (_, url), httpx.AsyncClient(timeout=30) as client:
            up.pause()
            tasks = []
            for _ in range(3):
                tasks.append(
                    asyncio.create_task(
                        client.post(url + "/v1/completions", json=BODY, headers=auth("sk-opp"))
                    )
                )
                await asyncio.sleep(0.05)  # in order
            up.resume()
            responses = list(await asyncio.gather(*tasks))
    return responses, trace


def _holds(tmp: Path, trace: Path, name: str, capsys: pytest.CaptureFixture[str]) -> bool:
    """``rvguard check TRACE --property FILE``'s verdict on the table."""
    spec = tmp / "contract.yaml"
    spec.write_text(yaml.safe_dump(contract_data(contract())))
    main(["check", str(trace), "--contract", str(spec), "--property", str(_table(tmp, name)), "--json"])
    (verdict,) = json.loads(capsys.readouterr().out)["tables"]["properties"].values()
    return bool(verdict)


@pytest.mark.parametrize(
    ("name", "prop", "bare_codes", "codes"),
    [  # k = 2: the third is one too many; T = 150: one request of 96 + prompt fits, two do not;
        ("tenant_concurrency.yaml", "TENANT_CONCURRENCY", [200] * 3, [200, 200, 429]),
        ("tenant_tokens.yaml", "TENANT_TOKENS", [200] * 3, [200, 429, 429]),
        ("cooldown.yaml", "COOLDOWN", [429, 200, 200], [429, 429, 429]),  # the learner's 429 first
    ],
)
async def test_serve_property_refuses_with_429_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    prop: str,
    bare_codes: list[int],
    codes: list[int],
) -> None:
    bare, trace = await _serve(tmp_path, name, enforced=False)
    assert [r.status_code for r in bare] == bare_codes
    assert not _holds(tmp_path, trace, name, capsys)  # without the table the trace breaks it

    shielded, trace = await _serve(tmp_path, name, enforced=True)
    assert [r.status_code for r in shielded] == codes
    assert _holds(tmp_path, trace, name, capsys)
    for r, before in zip(shielded, bare, strict=True):
        if r.status_code != before.status_code:  # the table's refusals: named, with a retry header
            assert r.json()["error"]["code"] == f"property: {prop}"
            assert int(r.headers["retry-after"]) >= 1 and "retry-after-ms" in r.headers
