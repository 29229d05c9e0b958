"""Arrival streams for the simulator: Poisson, bursty (gamma), and public-trace replay.

Why generated up front: an open-loop workload does not react to the server,
so the whole arrival list can be drawn before the run, from the run's one
`random.Random`. That keeps the event loop simple and makes "the same
arrivals, a different policy" a matter of reusing the list (the guarded and
unguarded arms of an experiment see identical arrivals).

Tenant rule for the synthetic streams: two independent streams, assured at
``assured_rate`` and opportunistic at ``opp_rate``, merged by time (ties by
stream order), rids ``r0, r1, …`` in arrival order. Output lengths are
``tokens`` (default 16, the reference study's ~16 output tokens), capped at
the contract's output cap.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path

from ..contract import Contract
from ..enforce.request import Request
from ..io.public import FractionRule, read_public, to_arrivals

__all__ = ["bursty", "merge_streams", "poisson", "replay", "split_rate"]

Gap = Callable[[], float]


def split_rate(contract: Contract, rate: float, *, assured: str = "assured") -> tuple[float, float]:
    """The stated split of a total rate: assured at min(rate, B/W), the rest opportunistic.

    Why: the reference study offers the assured tenant about its floor rate
    and floods with opportunistic traffic; one ``--rate`` then sets the flood.
    """
    floor_rate = contract.tenants[assured].floor / contract.window
    a = min(rate, floor_rate)
    return a, max(rate - a, 0.0)


def _stream(gap: Gap, duration: float) -> list[float]:
    times: list[float] = []
    t = gap()
    while t < duration:
        times.append(t)
        t += gap()
    return times


def merge_streams(
    streams: list[tuple[str, list[float]]], contract: Contract, *, tokens: int = 16
) -> list[Request]:
    """Merge per-tenant arrival times into requests ``r0, r1, …`` in time order."""
    tagged = sorted((t, i, name) for i, (name, times) in enumerate(streams) for t in times)
    n_tok = contract.capped_tokens(tokens)
    return [Request(f"r{k}", name, t, max_tokens=n_tok) for k, (t, _, name) in enumerate(tagged)]


def poisson(
    contract: Contract,
    rng: random.Random,
    *,
    assured_rate: float,
    opp_rate: float,
    duration: float,
    tokens: int = 16,
    assured: str = "assured",
    opportunistic: str = "opportunistic",
) -> list[Request]:
    """Two independent Poisson streams (exponential gaps) over ``[0, duration)``."""
    streams: list[tuple[str, list[float]]] = []
    for name, rate in ((assured, assured_rate), (opportunistic, opp_rate)):
        if rate > 0:
            streams.append((name, _stream(functools.partial(rng.expovariate, rate), duration)))
    return merge_streams(streams, contract, tokens=tokens)


def bursty(
    contract: Contract,
    rng: random.Random,
    *,
    assured_rate: float,
    opp_rate: float,
    duration: float,
    cv: float = 3.0,
    tokens: int = 16,
    assured: str = "assured",
    opportunistic: str = "opportunistic",
) -> list[Request]:
    """Two renewal streams with gamma gaps of coefficient of variation ``cv`` (cv = 1: Poisson).

    Why gamma: shape k = 1/cv² keeps the mean rate while cv > 1 clusters
    arrivals into bursts, the stress that window-straddling needs.
    """
    if not cv > 0:
        raise ValueError(f"cv must be positive, got {cv!r}")
    k = 1.0 / cv**2
    streams: list[tuple[str, list[float]]] = []
    for name, rate in ((assured, assured_rate), (opportunistic, opp_rate)):
        if rate > 0:
            scale = 1.0 / (rate * k)
            streams.append((name, _stream(functools.partial(rng.gammavariate, k, scale), duration)))
    return merge_streams(streams, contract, tokens=tokens)


def replay(
    path: str | Path,
    contract: Contract,
    *,
    rate: float,
    duration: float | None = None,
    seed: int = 0,
    output_cap: int = 48,
    assured: str = "assured",
    opportunistic: str = "opportunistic",
) -> list[Request]:
    """A public trace (Azure CSV, Mooncake JSONL, BurstGPT CSV) replayed open-loop.

    Time is scaled so the mean rate is ``rate``; each request is assured with
    probability min(1, (B/W)/rate) (a seeded `FractionRule`), so the assured
    tenant is offered about its floor rate; outputs are capped at
    ``output_cap`` (the reference study's 48). ``duration`` cuts the replay.
    """
    rows = read_public(path)
    a_rate, _ = split_rate(contract, rate, assured=assured)
    rule = FractionRule(fraction=min(1.0, a_rate / rate), seed=seed, assured=assured, other=opportunistic)
    arrivals = to_arrivals(rows, rate=rate, tenant_rule=rule, contract=contract, output_cap=output_cap)
    return [
        Request(a.rid, a.tenant, a.t, a.deadline, a.prompt_tokens, a.max_tokens)
        for a in arrivals
        if duration is None or a.t < duration
    ]
