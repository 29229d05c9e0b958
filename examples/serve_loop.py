"""Embed the guard in a small serving loop over an in-process backend, then check the trace.

A burst of assured requests (more than the floor) and an opportunistic flood
arrive together; the learner is adversarial (it rejects every assured request
and admits the whole flood). The guard admits the floor anyway, ranks it first,
writes every event to a JSON Lines trace, and ``rvguard check`` judges the
trace against the contract. Run: ``python examples/serve_loop.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import tempfile
from collections import Counter
from pathlib import Path

from rvguard.cli import main as rvguard_main
from rvguard.contract import Contract
from rvguard.enforce.dispatchers import MockDispatcher, Response
from rvguard.enforce.guard import Guard, JsonlSink
from rvguard.enforce.learners import LoadView
from rvguard.enforce.request import Request
from rvguard.events import Proposal

ASSURED_BURST = 10
OPP_FLOOD = 12
SERVICE_S = 0.002

CONTRACT = {
    "epoch": 0.0,
    "window": 1.0,
    "slots": 4,
    "output_cap": 48,
    "excess": "reject",
    "service": {"s_max": 0.66, "s_max_opp": 0.66, "lower": 0.0},
    "tenants": {
        "assured": {"floor": 6, "deadline": 1.82, "tier": 0},
        "opportunistic": {"floor": 0, "deadline": 1.82, "tier": 1},
    },
}


class Adversary:
    """Rejects the assured class, admits the flood and claims it is assured, first."""

    def propose(self, request: Request, view: LoadView) -> Proposal:
        """The worst proposal it can make for each class."""
        if request.tenant == "assured":
            return Proposal(admit=False)
        return Proposal(admit=True, objective="assured", priority_hint=-1e9)


async def backend(request: Request) -> Response:
    """An in-process model: a fixed service time, echoing the capped length."""
    await asyncio.sleep(SERVICE_S)
    return Response(text="ok", output_tokens=request.max_tokens)


async def serve(contract: Contract, trace: Path) -> Counter[str]:
    """Submit the burst and the flood concurrently; count outcomes by tenant and status."""
    sinks = [JsonlSink(trace)]
    async with Guard(contract, MockDispatcher(backend), learner=Adversary(), sinks=sinks) as guard:
        reqs = [Request(f"o{i}", "opportunistic", 0.0, max_tokens=500) for i in range(OPP_FLOOD)]
        reqs += [Request(f"a{i}", "assured", 0.0, max_tokens=16) for i in range(ASSURED_BURST)]
        outcomes = await asyncio.gather(*(guard.submit(r) for r in reqs))
    return Counter(f"{r.tenant}: {o.status} {o.reason}".strip() for r, o in zip(reqs, outcomes, strict=True))


def check(trace: Path, spec: Path) -> tuple[int, dict[str, object]]:
    """Run ``rvguard check TRACE --contract SPEC --json``; return its exit code and JSON."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = rvguard_main(["check", str(trace), "--contract", str(spec), "--json"])
    return code, json.loads(out.getvalue())


def main() -> None:
    """Serve, write the trace, check it, print a deterministic summary."""
    contract = Contract.model_validate(CONTRACT)
    with tempfile.TemporaryDirectory() as tmp:
        trace, spec = Path(tmp) / "trace.jsonl", Path(tmp) / "contract.json"
        spec.write_text(json.dumps(CONTRACT))
        counts = asyncio.run(serve(contract, trace))
        code, report = check(trace, spec)
    for key in sorted(counts):
        print(f"{key}: {counts[key]}")
    metrics = report["metrics"]
    assert isinstance(metrics, dict)
    print(f"rvguard check exit code: {code}")
    print(f"violations: {len(report['violations'])}")  # type: ignore[arg-type]
    for name in ("entitled", "entitled_attained", "floor_attainment", "admitted_miss"):
        print(f"{name}: {metrics[name]}")


if __name__ == "__main__":
    main()
