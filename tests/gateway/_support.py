"""Shared pieces of the gateway tests: a contract, keys, a running gateway, trace helpers."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from rvguard.contract import Contract, contract_from_mapping
from rvguard.enforce.learners import LoadView
from rvguard.enforce.request import Request
from rvguard.events import Proposal
from rvguard.gateway.app import Gateway, GatewaySettings, serving
from rvguard.gateway.config import KeysConfig

KEYS = {"sk-assured": "assured", "sk-opp": "opportunistic"}
SECRET = b"0123456789abcdef-test-secret"
TERMINAL = {"reject", "complete", "drop", "fail"}


def contract(**over: Any) -> Contract:
    """C = 4 slots, W = 1 s, an assured floor of 2 per window, cap 96 tokens."""
    data: dict[str, Any] = {
        "epoch": 0.0,
        "window": 1.0,
        "slots": 4,
        "output_cap": 96,
        "excess": "reject",
        "credit": "count",
        "service": {"s_max": 0.4, "s_max_opp": 0.4, "lower": 0.001, "upper": None},
        "tenants": {
            "assured": {"floor": 2, "deadline": 1.5, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 60.0, "tier": 1},
        },
    }
    data.update(over)
    return contract_from_mapping(data)


def settings(upstream: str, trace: Path | None, **over: Any) -> GatewaySettings:
    base = GatewaySettings(upstream=upstream, keys=KeysConfig(keys=KEYS, claim_secret=SECRET), trace=trace)
    return replace(base, **over)


@contextlib.asynccontextmanager
async def gateway(c: Contract, s: GatewaySettings) -> AsyncIterator[tuple[Gateway, str]]:
    gw = Gateway(c, s)
    async with serving(gw.app) as url:
        yield gw, url


def read_trace(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def terminal_counts(events: list[dict[str, Any]]) -> Counter[str]:
    """rid → number of terminal events."""
    c: Counter[str] = Counter()
    for ev in events:
        c[ev["rid"]] += ev["kind"] in TERMINAL
    return c


def tenants(events: list[dict[str, Any]]) -> dict[str, str]:
    return {ev["rid"]: ev["tenant"] for ev in events if ev["kind"] == "arrive"}


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


class RejectAssured:
    """The adversarial learner: rejects every floored tenant's request, admits the rest (overload)."""

    def __init__(self, c: Contract | None = None) -> None:
        self._floored = {n for n, t in (c or contract()).tenants.items() if t.floored}

    def propose(self, request: Request, view: LoadView) -> Proposal:
        return Proposal(admit=request.tenant not in self._floored)
