"""The P95 screen's prediction (DESIGN §6): contract + workload summary → assured P95, accept/reject.

Why a screen and not a check: P95 is a property of the arrival/service
ensemble, not of one trace, and no guard enforces it. This module answers
"is P95 ≤ D likely at this load?" from a queueing model (`rvguard.screen.queueing`)
and labels every answer as a screen, not a guarantee, with flags where the
model is known to be optimistic (ρ → 1, dispersed service, deadlines below
the service time). How far the answer can be trusted is measured by
`rvguard.screen.evaluate`.

The service-percentile dial: the model's mean service is the sample's p50,
mean or p99 (or any ``pNN``); the sample is rescaled to that mean, keeping
its shape. A higher percentile predicts longer sojourns, so it accepts less
(coverage) and wrongly less (precision).

Admission, as the guard does it (``gating=True``): a floored tenant offered
Poisson(λ) is admitted E[min(N, B)]/W per second, N ~ Poisson(λW) (count
credits); its excess is rejected, or with ``excess: demote`` joins the lowest
tier. Unfloored tenants are all admitted (the learner's surplus choice is
not modelled: admit-all, the worst case for the assured class's wait).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..contract import Contract, CreditMode, ExcessPolicy
from ..errors import SpecError
from .queueing import ServiceDistribution, class_waits, erlang_c, sojourn_quantile

__all__ = ["LABEL", "Flag", "ScreenResult", "TenantScreen", "Workload", "dial_value", "screen"]

LABEL = "screen, not a guarantee"
CAVEAT = (
    "screen, not a guarantee: a queueing-model estimate of the assured P95 sojourn; "
    "P95 is neither enforced nor certified by rvguard"
)
RHO_FLAG = 0.95
SCV_FLAG = 1.0
SPREAD_FLAG = 3.0
Policy = Literal["priority", "fifo"]


@dataclass(frozen=True)
class Workload:
    """What the screen needs besides the contract.

    Attributes:
        rates: offered arrival rate (req/s) per tenant; tenants left out offer 0.
        service: the service-time sample.
        policy: ``priority`` (the guard: tier, then arrival) or ``fifo``.
        gating: apply the guard's floor admission to floored tenants.
    """

    rates: Mapping[str, float]
    service: ServiceDistribution
    policy: Policy = "priority"
    gating: bool = True


@dataclass(frozen=True)
class Flag:
    """A regime where the model is known to be optimistic."""

    name: str
    detail: str


@dataclass(frozen=True)
class TenantScreen:
    """The screen's answer for one floored tenant."""

    tenant: str
    offered_rate: float
    admitted_rate: float
    mean_wait: float
    p95: float
    deadline: float

    @property
    def accept(self) -> bool:
        """Predicted P95 ≤ D."""
        return self.p95 <= self.deadline


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class ScreenResult:
    """A screen verdict; ``label`` and ``caveat`` travel with it everywhere."""

    percentile: str
    service_assumed: float
    service_mean: float
    service_scv: float
    slots: int
    policy: Policy
    rho_offered: float
    rho_admitted: float
    p_wait: float
    tenants: tuple[TenantScreen, ...]
    flags: tuple[Flag, ...]
    notes: tuple[str, ...] = field(default=())
    label: str = LABEL
    caveat: str = CAVEAT

    @property
    def accept(self) -> bool:
        """Every floored tenant's predicted P95 is within its deadline."""
        return all(t.accept for t in self.tenants)

    @property
    def verdict(self) -> str:
        """``accept`` or ``reject``, never without the label."""
        return f"{'accept' if self.accept else 'reject'} ({self.label})"

    def to_dict(self) -> dict[str, Any]:
        """The ``screen --json`` object (``inf`` becomes null: no finite prediction)."""
        return {
            "label": self.label,
            "caveat": self.caveat,
            "verdict": self.verdict,
            "accept": self.accept,
            "percentile": self.percentile,
            "service_assumed": self.service_assumed,
            "service_mean": self.service_mean,
            "service_scv": self.service_scv,
            "slots": self.slots,
            "policy": self.policy,
            "rho_offered": self.rho_offered,
            "rho_admitted": self.rho_admitted,
            "p_wait": self.p_wait,
            "tenants": [
                {
                    "tenant": t.tenant,
                    "offered_rate": t.offered_rate,
                    "admitted_rate": t.admitted_rate,
                    "mean_wait": _finite(t.mean_wait),
                    "p95": _finite(t.p95),
                    "deadline": t.deadline,
                    "accept": t.accept,
                }
                for t in self.tenants
            ],
            "flags": [{"name": f.name, "detail": f.detail} for f in self.flags],
            "notes": list(self.notes),
        }


_DIAL = re.compile(r"^p(\d{1,2}(?:\.\d+)?)$")


def dial_value(service: ServiceDistribution, percentile: str) -> float:
    """The mean service the model assumes: the sample's ``mean`` or its ``pNN`` percentile.

    Raises:
        SpecError: an unknown dial (field ``percentile``).
    """
    if percentile == "mean":
        return service.mean
    match = _DIAL.match(percentile)
    if match is None or not 0.0 < float(match.group(1)) < 100.0:
        raise SpecError(
            f"percentile must be 'mean' or pNN with 0 < NN < 100 (p50, p99), got {percentile!r}",
            field="percentile",
            value=percentile,
        )
    return service.percentile(float(match.group(1)))


def gated_rate(rate: float, floor: float, window: float) -> float:
    """E[min(N, B)]/W for N ~ Poisson(rate·W): the admitted rate under a count floor B."""
    mu = rate * window
    if mu <= 0.0:
        return 0.0
    b = int(floor)
    log_p = -mu  # log P(N = 0)
    below = 0.0  # Σ_{n<B} n·P(N = n)
    cdf = 0.0  # P(N < B)
    for n in range(b):
        p = math.exp(log_p)
        below += n * p
        cdf += p
        log_p += math.log(mu) - math.log(n + 1)
    return (below + b * max(0.0, 1.0 - cdf)) / window


def _admitted(contract: Contract, workload: Workload) -> tuple[dict[str, float], float, list[str]]:
    """Admitted rate per tenant, the demoted excess rate, and notes on what was assumed."""
    notes: list[str] = []
    admitted: dict[str, float] = {}
    demoted = 0.0
    for name, tenant in contract.tenants.items():
        rate = float(workload.rates.get(name, 0.0))
        if not (workload.gating and tenant.floored) or rate <= 0.0:
            admitted[name] = max(rate, 0.0)
            continue
        if contract.credit is CreditMode.TOKENS:
            admitted[name] = rate
            notes.append(f"{name}: token-credit gating is not modelled; all {rate:g}/s assumed admitted")
            continue
        admitted[name] = gated_rate(rate, tenant.floor, contract.window)
        if contract.excess is ExcessPolicy.DEMOTE:
            demoted += rate - admitted[name]
    return admitted, demoted, notes


def _class_rates(
    contract: Contract, admitted: Mapping[str, float], demoted: float, policy: Policy
) -> tuple[list[float], dict[str, int]]:
    """Per-class rates in dispatch order, and each tenant's class index."""
    if policy == "fifo":
        return [sum(admitted.values()) + demoted], dict.fromkeys(contract.tenants, 0)
    tiers = sorted({t.tier for t in contract.tenants.values()})
    index = {tier: i for i, tier in enumerate(tiers)}
    rates = [0.0] * len(tiers)
    for name, tenant in contract.tenants.items():
        rates[index[tenant.tier]] += admitted[name]
    rates[-1] += demoted
    return rates, {name: index[t.tier] for name, t in contract.tenants.items()}


def _flags(rho: float, service: ServiceDistribution, deadlines: Mapping[str, float]) -> tuple[Flag, ...]:
    flags: list[Flag] = []
    if rho >= RHO_FLAG:
        flags.append(
            Flag(
                "near-saturation", f"ρ = {rho:.3f} ≥ {RHO_FLAG}: first-moment models are optimistic as ρ → 1"
            )
        )
    p50, p99 = service.percentile(50), service.percentile(99)
    if service.scv >= SCV_FLAG or p99 >= SPREAD_FLAG * p50:
        flags.append(
            Flag(
                "high-dispersion",
                f"service c_s² = {service.scv:.3f}, p99/p50 = {p99 / p50:.2f}: "
                "the tail a mean-based model omits can dominate",
            )
        )
    for name, d in deadlines.items():
        if d < p99:
            flags.append(
                Flag(
                    "sub-service-deadline",
                    f"{name}: D = {d:g} s is below the service p99 = {p99:g} s",
                )
            )
    return tuple(flags)


def screen(
    contract: Contract,
    workload: Workload,
    *,
    percentile: str = "p99",
    deadlines: Mapping[str, float] | None = None,
) -> ScreenResult:
    """Screen the assured P95 of every floored tenant against its deadline.

    Args:
        contract: C, the tenants' floors, tiers, deadlines and excess policy.
        workload: offered rates, service sample, dispatch policy, gating.
        percentile: the service dial: ``p50``, ``mean``, ``p99`` or any ``pNN``.
        deadlines: override a tenant's deadline (seconds), e.g. for a sweep.

    Raises:
        SpecError: an unknown tenant in the rates, a negative rate, no floored
            tenant, or a bad dial.
    """
    _validate(contract, workload)
    m = dial_value(workload.service, percentile)
    service = workload.service.scaled(m)
    admitted, demoted, notes = _admitted(contract, workload)
    rates, cls = _class_rates(contract, admitted, demoted, workload.policy)
    c = contract.slots
    waits = class_waits(rates, m, c, scv=workload.service.scv)
    rho_admitted = sum(rates) * m / c
    p_wait = erlang_c(c, c * rho_admitted)
    d_over = dict(deadlines or {})
    floored = contract.floored_tenants
    tenants = tuple(
        TenantScreen(
            tenant=name,
            offered_rate=float(workload.rates.get(name, 0.0)),
            admitted_rate=admitted[name],
            mean_wait=waits[cls[name]],
            p95=sojourn_quantile(service, waits[cls[name]], p_wait),
            deadline=d_over.get(name, t.deadline),
        )
        for name, t in floored.items()
    )
    return ScreenResult(
        percentile=percentile,
        service_assumed=m,
        service_mean=workload.service.mean,
        service_scv=workload.service.scv,
        slots=c,
        policy=workload.policy,
        rho_offered=sum(max(r, 0.0) for r in workload.rates.values()) * m / c,
        rho_admitted=rho_admitted,
        p_wait=p_wait,
        tenants=tenants,
        flags=_flags(rho_admitted, workload.service, {t.tenant: t.deadline for t in tenants}),
        notes=tuple(notes),
    )


def _validate(contract: Contract, workload: Workload) -> None:
    if not contract.floored_tenants:
        raise SpecError("the contract has no floored tenant: nothing to screen", field="tenants")
    for name, rate in workload.rates.items():
        if name not in contract.tenants:
            raise SpecError(
                f"--rate names tenant {name!r}, not in the contract ({', '.join(contract.tenants)})",
                field="rate",
                value=name,
            )
        if not (math.isfinite(rate) and rate >= 0.0):
            raise SpecError(
                f"rate of {name!r} must be finite and ≥ 0, got {rate!r}", field="rate", value=rate
            )
    if workload.policy not in ("priority", "fifo"):
        raise SpecError(f"policy must be priority or fifo, got {workload.policy!r}", field="policy")
