"""Arrival streams for the simulator: Poisson, bursty (gamma), and public-trace replay.

Why generated up front: an open-loop workload does not react to the server,
so the whole arrival list can be drawn before the run, from the run's one
`random.Random`. That keeps the event loop simple and makes "the same
arrivals, a different policy" a matter of reusing the list (the guarded and
unguarded arms of an experiment see identical arrivals).

Tenant rule (`roles`), from the contract alone, whatever the tenants are
called: the *floored* tenants (floor > 0) are the assured role and share the
assured rate in proportion to their floors; the *unfloored* tenants
(floor 0) are the opportunistic role and share the opportunistic rate
equally. Within a role, tenants are taken by tier, then in the contract's
order. On the marquee (one ``assured`` tenant with B = 6, one
``opportunistic``) this is the reference study's two streams exactly.

Synthetic streams: one independent stream per tenant at its share of the
rate, drawn in that order from the one generator, merged by time (ties by
stream order), rids ``r0, r1, …`` in arrival order. Output lengths are
``tokens`` (default 16, the reference study's ~16 output tokens), capped at
the contract's output cap. Replay assigns each trace request by one seeded
uniform draw over the same shares (`ShareRule`).

Rates and durations must be finite and non-negative (a non-finite one would
never end the stream), and a role offered a positive rate needs a tenant:
otherwise `SpecError`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..contract import Contract, CreditMode
from ..enforce.request import Request
from ..errors import SpecError
from ..io.public import PublicArrival, read_public, to_arrivals

__all__ = [
    "Roles",
    "ShareRule",
    "bursty",
    "floor_rate",
    "merge_streams",
    "paced",
    "poisson",
    "public_rows",
    "replay",
    "replay_shares",
    "roles",
    "split_rate",
]

Gap = Callable[[], float]
Shares = tuple[tuple[str, float], ...]  # (tenant, share of its role's rate), shares summing to 1


@dataclass(frozen=True)
class Roles:
    """The stated tenant rule of a contract (module doc): who offers which rate.

    Attributes:
        assured: the floored tenants, each with its share B_i / Σ B.
        opportunistic: the unfloored tenants, each with an equal share.
    """

    assured: Shares
    opportunistic: Shares


def roles(contract: Contract) -> Roles:
    """The floored tenants (by floor) and the unfloored ones (equally), each by tier then contract order."""
    order = sorted(enumerate(contract.tenants.items()), key=lambda e: (e[1][1].tier, e[0]))
    floored = [(n, t.floor) for _, (n, t) in order if t.floored]
    total = sum(b for _, b in floored)
    unfloored = [n for _, (n, t) in order if not t.floored]
    return Roles(
        tuple((n, b / total) for n, b in floored),
        tuple((n, 1.0 / len(unfloored)) for n in unfloored),
    )


def floor_rate(contract: Contract, *, tokens: int = 16) -> float:
    """Σ B / W over the floored tenants, in requests per second: the assured rate the floors cover.

    With token credits a floor counts weighted tokens, so the request rate is
    Σ B / (W · w(R)) for a request of ``tokens`` output tokens and no prompt
    (the synthetic streams' requests; for a replayed trace it is an
    approximation, its requests' weights vary).
    """
    rate = sum(t.floor for t in contract.floored_tenants.values()) / contract.window
    if contract.credit is CreditMode.COUNT:
        return rate
    w = contract.weight(None, tokens)
    return rate / w if w > 0 else rate


def split_rate(contract: Contract, rate: float) -> tuple[float, float]:
    """The stated split of a total rate: assured at min(rate, Σ B/W), the rest opportunistic.

    Why: the reference study offers the assured tenant about its floor rate
    and floods with opportunistic traffic; one ``--rate`` then sets the flood.
    With several floored tenants each is offered its own floor rate B_i/W
    (`roles`).
    """
    a = min(rate, floor_rate(contract))
    return a, max(rate - a, 0.0)


def _check_rate(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise SpecError(f"{name} must be a finite number ≥ 0, got {value!r}", field=name, value=value)


def _tenant_rates(contract: Contract, assured_rate: float, opp_rate: float) -> list[tuple[str, float]]:
    """Each tenant's rate under `roles`, in stream order; tenants at rate 0 are left out.

    Raises:
        SpecError: a non-finite or negative rate, or a positive rate for a role no tenant holds.
    """
    _check_rate("assured_rate", assured_rate)
    _check_rate("opp_rate", opp_rate)
    r = roles(contract)
    out: list[tuple[str, float]] = []
    for role, shares, rate in (
        ("floored", r.assured, assured_rate),
        ("unfloored", r.opportunistic, opp_rate),
    ):
        if rate > 0 and not shares:
            raise SpecError(
                f"the contract has no {role} tenant ({'floor > 0' if role == 'floored' else 'floor 0'}) "
                f"to offer {rate:g} req/s to",
                field="tenants",
            )
        out += [(name, rate * share) for name, share in shares if rate > 0]
    return out


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
) -> list[Request]:
    """Independent Poisson streams (exponential gaps) over ``[0, duration)``, one per tenant (`roles`).

    Raises:
        SpecError: a non-finite or negative rate or duration; a rate for a role no tenant holds.
    """
    rates = _tenant_rates(contract, assured_rate, opp_rate)
    _check_rate("duration", duration)
    streams = [(name, _stream(functools.partial(rng.expovariate, rate), duration)) for name, rate in rates]
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
) -> list[Request]:
    """Renewal streams with gamma gaps of coefficient of variation ``cv`` (cv = 1: Poisson), one per tenant.

    Why gamma: shape k = 1/cv² keeps the mean rate while cv > 1 clusters
    arrivals into bursts, the stress that window-straddling needs.

    Raises:
        SpecError: ``cv`` not a finite positive number, or as `poisson`.
    """
    if not (math.isfinite(cv) and cv > 0):
        raise SpecError(f"cv must be a finite number > 0, got {cv!r}", field="cv", value=cv)
    rates = _tenant_rates(contract, assured_rate, opp_rate)
    _check_rate("duration", duration)
    k = 1.0 / cv**2
    streams = [
        (name, _stream(functools.partial(rng.gammavariate, k, 1.0 / (rate * k)), duration))
        for name, rate in rates
    ]
    return merge_streams(streams, contract, tokens=tokens)


def _even(rng: random.Random, rate: float, duration: float) -> list[float]:
    """Evenly spaced at 1/rate from a uniform random phase in [0, 1/rate)."""
    gap = 1.0 / rate
    phase = rng.uniform(0.0, gap)
    return [phase + k * gap for k in range(math.ceil((duration - phase) / gap))]


def paced(
    contract: Contract,
    rng: random.Random,
    *,
    assured_rate: float,
    opp_rate: float,
    duration: float,
    tokens: int = 16,
) -> list[Request]:
    """The floored tenants paced (evenly spaced, random phase), the unfloored ones Poisson.

    Why: the reference study's marquee offered 72 assured a run and rejected
    none at B = 6 per 1 s window, so its assured stream never put more than
    B in a window: spread arrivals. Paced at B/W, every contract window holds
    exactly B of them whatever the phase. The opportunistic flood stays
    Poisson. `poisson` is the variant reported beside it.

    Raises:
        SpecError: as `poisson`.
    """
    rates = _tenant_rates(contract, assured_rate, opp_rate)
    _check_rate("duration", duration)
    floored = contract.floored_tenants
    streams = [
        (
            name,
            _even(rng, rate, duration)
            if name in floored
            else _stream(functools.partial(rng.expovariate, rate), duration),
        )
        for name, rate in rates
    ]
    return merge_streams(streams, contract, tokens=tokens)


@dataclass(frozen=True)
class ShareRule:
    """Each arrival's tenant by one seeded uniform draw u: the first whose cumulative share exceeds u.

    With two tenants it is `rvguard.io.public.FractionRule` draw for draw
    (``u < fraction`` → the first).
    """

    shares: Shares
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.shares:
            raise ValueError("a share rule needs at least one tenant")

    def tenants(self) -> Iterator[str]:
        """Seeded draws, one per arrival."""
        names = [n for n, _ in self.shares]
        bounds = list(itertools.accumulate(s for _, s in self.shares))
        rng = random.Random(self.seed)
        while True:
            u = rng.random()
            yield next((n for n, b in zip(names, bounds, strict=True) if u < b), names[-1])


def replay_shares(contract: Contract, rate: float) -> Shares:
    """Trace replay's tenant shares: the floored tenants take min(1, Σ(B/W)/rate) by floor, the rest equally.

    Raises:
        SpecError: the floors do not cover ``rate`` and no unfloored tenant takes the rest.
    """
    return tuple((name, r / rate) for name, r in _tenant_rates(contract, *split_rate(contract, rate)))


@functools.lru_cache(maxsize=8)
def _cached_rows(path: str, mtime_ns: int) -> tuple[PublicArrival, ...]:
    return tuple(read_public(path))


def public_rows(path: str | Path) -> tuple[PublicArrival, ...]:
    """A public trace's rows, parsed once per file version (experiments replay one slice many times)."""
    p = Path(path)
    return _cached_rows(str(p), p.stat().st_mtime_ns)


def replay(
    path: str | Path,
    contract: Contract,
    *,
    rate: float,
    duration: float | None = None,
    seed: int = 0,
    output_cap: int = 48,
    rows: tuple[int, int] | None = None,
) -> list[Request]:
    """A public trace (Azure CSV, Mooncake JSONL, BurstGPT CSV) replayed open-loop.

    Time is scaled so the mean rate is ``rate``; each request goes to a tenant
    by a seeded `ShareRule` over `replay_shares`: the floored tenants together
    take the fraction min(1, (Σ B/W)/rate), split by floor, so each is
    offered about its floor rate; the unfloored tenants share the rest
    equally. Outputs are capped at ``output_cap`` (the reference study's 48).
    ``duration`` cuts the replay; ``rows`` = (first, end) replays that slice
    of the trace's rows alone, its first arrival at t = 0. Requests carry no
    deadline of their own (the policy applies the tenant's), so one replay
    serves contracts that differ only in their deadlines.

    Raises:
        SpecError: ``rate`` or ``duration`` not finite and positive; the trace
            has fewer than two arrivals at different times (it cannot be
            scaled to a rate); a role without a tenant (`replay_shares`).
    """
    if not (math.isfinite(rate) and rate > 0):
        raise SpecError(f"rate must be a finite number > 0, got {rate!r}", field="rate", value=rate)
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise SpecError(f"duration must be a finite number > 0, got {duration!r}", field="duration")
    rule = ShareRule(replay_shares(contract, rate), seed=seed)
    table = list(public_rows(path))
    if rows is not None:
        part = table[rows[0] : rows[1]]
        table = [dataclasses.replace(r, t=r.t - part[0].t) for r in part] if part else []
    if len(table) < 2 or table[-1].t <= table[0].t:
        raise SpecError(
            f"{path}: {len(table)} arrival(s) spanning {table[-1].t - table[0].t if table else 0:g} s; "
            "replay at a rate needs at least two arrivals at different times",
            field="workload",
        )
    arrivals = to_arrivals(table, rate=rate, tenant_rule=rule, contract=contract, output_cap=output_cap)
    return [
        Request(a.rid, a.tenant, a.t, None, a.prompt_tokens, a.max_tokens)
        for a in arrivals
        if duration is None or a.t < duration
    ]
