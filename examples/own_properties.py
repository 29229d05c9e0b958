"""Your own properties as tables: written in YAML, verified by Z3, enforced live, checked.

Three tables under examples/properties/: per-tenant concurrency ≤ k, per-tenant tokens admitted
and not ended ≤ T, and no admission of a tenant within 1 s of its last rejection (a 429). For
each: its Z3 obligations; a trace that breaks it, refused by the shield at the breaking event (with
the table's remedy) and caught by the online monitor and the offline checker; and the same requests
through a `Guard` that enforces the table (``Guard(config=GuardConfig(properties=[table]))``): the
breaking admission is refused with reason ``property: NAME`` (``rvguard serve --property FILE``
answers it 429).

Run: python examples/own_properties.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rvguard.clock import ManualClock
from rvguard.contract import contract_from_mapping
from rvguard.enforce import Guard, GuardConfig, MockDispatcher, Request, Response
from rvguard.enforce.learners import LoadView
from rvguard.events import Admit, Arrive, Basis, Complete, Dispatch, Event, Proposal, Reject
from rvguard.properties import PropertyTable, TableMonitor
from rvguard.properties.load import load_properties
from rvguard.properties.obligations import check_table
from rvguard.properties.offline import check_columns
from rvguard.properties.shield import Shield

HERE = Path(__file__).resolve().parent / "properties"
CONTRACT = contract_from_mapping(
    {
        "epoch": 0.0,
        "window": 1.0,
        "slots": 8,
        "output_cap": 1024,
        "service": {"s_max": 1.0, "lower": 0.1},
        "tenants": {"acme": {"floor": 0, "deadline": 10.0, "tier": 1}},
    }
)


def running(n: int, prompt: int = 100, max_tokens: int = 1024) -> list[Event]:
    """n requests of acme arriving, admitted and dispatched at t = 0, 0.1, ..."""
    out: list[Event] = []
    for i in range(n):
        t = i / 10
        out += [Arrive(t, f"r{i}", "acme", prompt_tokens=prompt, max_tokens=max_tokens), Admit(t, f"r{i}")]
        out.append(Dispatch(t, f"r{i}"))
    return out


TRACES: dict[str, list[Event]] = {
    "tenant_concurrency.yaml": [*running(3)],  # k = 2: the third dispatch breaks it
    "tenant_tokens.yaml": [*running(2, prompt=3000), Complete(0.5, "r0")],  # 3000 + 1024 twice > 4096
    "cooldown.yaml": [
        Arrive(0.0, "r0", "acme"),
        Reject(0.0, "r0", "429"),
        Arrive(0.5, "r1", "acme"),
        Admit(0.6, "r1", Basis.SURPLUS),  # within 1 s of the 429
    ],
}


class Refuse:
    """A learner that rejects the rids it names (a 429) and admits the rest."""

    def __init__(self, *rids: str) -> None:
        self.rids = set(rids)

    def propose(self, request: Request, view: LoadView) -> Proposal:
        return Proposal(admit=request.rid not in self.rids)


def guarded(table: PropertyTable, trace: list[Event]) -> list[str]:
    """The trace's arrivals submitted to a Guard enforcing ``table`` (a learner refusing the
    requests the trace rejects); every request runs until all have arrived. Their outcomes."""
    arrivals = [ev for ev in trace if isinstance(ev, Arrive)]
    refused = [ev.rid for ev in trace if isinstance(ev, Reject)]

    async def run() -> list[str]:
        clock, go = ManualClock(), asyncio.Event()

        async def backend(request: Request) -> Response:
            await go.wait()
            return Response()

        learner = Refuse(*refused)
        guard = Guard(
            CONTRACT,
            MockDispatcher(backend),
            learner=learner,
            clock=clock,
            config=GuardConfig(learner_timeout=None, properties=[table]),
        )
        async with guard:
            tasks = []
            for ev in arrivals:
                clock.set(ev.t)
                request = Request(
                    ev.rid, ev.tenant, ev.t, prompt_tokens=ev.prompt_tokens, max_tokens=ev.max_tokens
                )
                tasks.append(asyncio.create_task(guard.submit(request)))
                await asyncio.sleep(0)
            go.set()
            outcomes = await asyncio.gather(*tasks)
        return [f"{o.rid} {o.status}" + (f" ({o.reason})" if o.reason else "") for o in outcomes]

    return asyncio.run(run())


def main() -> None:
    for name, trace in TRACES.items():
        (table,) = load_properties(HERE / name)
        print(f"== {table.name}: {table.description}")
        for o in check_table(table):
            print(f"  z3 {'ok  ' if o.holds else 'FAIL'} {o.name}")
        shield = Shield(CONTRACT, [table])
        for ev in trace:
            d = shield.decide(ev)
            if not d.passed:
                shown = ", ".join(f"{e.kind.value} {e.rid}" for e in d.events) or "nothing"
                print(f"  shield: {ev.kind.value} {ev.rid} at t={ev.t:g} -> {d.action} (emits {shown})")
        for v in TableMonitor(CONTRACT, [table]).feed_all(trace):
            print(f"  monitor: {v.property} {v.rid} at t={v.t:g}: {v.detail}")
        offline = check_columns(CONTRACT, [table], trace)
        print(f"  offline ({offline.paths[table.name]}): {[(v.rid, v.t) for v in offline.violations]}")
        print(f"  guard enforcing it: {', '.join(guarded(table, trace))}")


if __name__ == "__main__":
    main()
