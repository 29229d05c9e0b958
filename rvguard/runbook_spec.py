"""The contract's optional runbook blocks (DESIGN §10): ``headroom``, ``eviction``, ``fleet``.

Each block holds the parameters a runbook mechanism and its monitored
property need, validated at load time like the rest of the contract (a
frozen pydantic model; a bad value is a `SpecError` naming the field):

* ``headroom`` — the physical redline (`rvguard.enforce.redline.RedlineConfig`
  via `rvguard.enforce.redline.redline_config`) and property RL: ``alpha``,
  ``horizon``, ``dwell``, ``staleness`` (how old a sample may be when a
  demotion cites it) and per resource ``h_min``, ``margin``, ``hard_floor``;
* ``eviction`` — ``k``, the evictions in flight at most (property EV), and
  optionally the emergency channel's ``capacity`` (KV tokens), ``target``
  (headroom to restore), ``overhead`` (s per eviction), ``link_rate`` and
  ``link_burst`` (the relocation link's token bucket), and the voluntary
  channel's crossover prices (``voluntary``: off unless given);
* ``fleet`` — ``staleness`` of a routing view and each engine's slots C_e
  (property FR).

Two rules compare fields and so cannot be written in JSON Schema: a
resource's ``margin`` ≤ 1 − ``h_min`` and ``hard_floor`` ≤ ``h_min``; they
are refused with the mark "inverted headroom limits".
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, model_validator

from .bounds import MAX_SLOTS, MAX_SPAN

__all__ = ["EvictionSpec", "FleetSpec", "HeadroomSpec", "ResourceSpec", "VoluntarySpec"]

#: an engine's slot count C_e
Slots = Annotated[int, Field(ge=1, le=MAX_SLOTS)]
#: a resource's or an engine's name
Name = Annotated[str, Field(min_length=1)]
#: the largest dwell (fresh samples) a resource may be held firing
MAX_DWELL = 10**6


class ResourceSpec(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """One resource's redline limits, as headroom fractions (1 = all free)."""

    h_min: float = Field(gt=0.0, le=1.0, description="fire below this headroom")
    margin: float = Field(default=0.05, ge=0.0, le=1.0, description="clear at h_min + margin or above")
    hard_floor: float = Field(default=0.0, ge=0.0, le=1.0, description="below it preemption/eviction may act")

    @model_validator(mode="after")
    def _check_order(self) -> ResourceSpec:
        if self.margin > 1.0 - self.h_min:
            raise ValueError(
                f"margin {self.margin:g} exceeds 1 − h_min = {1.0 - self.h_min:g}: the redline could never "
                "clear (inverted headroom limits)"
            )
        if self.hard_floor > self.h_min:
            raise ValueError(
                f"hard_floor {self.hard_floor:g} is above h_min {self.h_min:g} (inverted headroom limits)"
            )
        return self


class HeadroomSpec(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """The physical redline's parameters and RL's freshness bound."""

    alpha: float = Field(default=0.3, gt=0.0, le=1.0, description="EWMA weight of each fresh sample")
    horizon: float = Field(default=0.0, ge=0.0, le=MAX_SPAN, description="seconds the trend is projected")
    dwell: int = Field(default=1, ge=1, le=MAX_DWELL, description="fresh samples a firing resource stays")
    staleness: float = Field(gt=0.0, le=MAX_SPAN, description="seconds a sample stays fresh for a demotion")
    resources: dict[Name, ResourceSpec] = Field(min_length=1)


class VoluntarySpec(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """The voluntary channel's crossover rule (`rvguard.enforce.eviction.crossover`): evict a running
    surplus request when its expected remaining seconds (tokens still allowed × ``token_seconds``)
    × ``opportunity_rate`` exceeds ``fixed`` + ``per_token`` × its state S, strictly."""

    opportunity_rate: float = Field(gt=0.0, le=1e12, description="cost per second of keeping a request")
    fixed: float = Field(default=0.0, ge=0.0, le=1e12, description="cost of one move, whatever its size")
    per_token: float = Field(default=0.0, ge=0.0, le=1e12, description="cost of moving one state token")
    token_seconds: float = Field(gt=0.0, le=MAX_SPAN, description="expected seconds per generated token")


class EvictionSpec(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """The eviction channel's bound, at most ``k`` evictions in flight (EV), and the emergency
    channel's parameters (`rvguard.enforce.eviction.eviction_config`): with ``capacity`` and
    ``target`` both given the Guard evicts past the hard floor, else it preempts (EV still judged)."""

    k: int = Field(ge=1, le=MAX_SLOTS, description="evictions in flight at most")
    capacity: int | None = Field(default=None, ge=1, description="the node's KV capacity in tokens")
    target: float | None = Field(default=None, gt=0.0, le=1.0, description="headroom to restore")
    overhead: float = Field(default=0.0, ge=0.0, le=MAX_SPAN, description="seconds per eviction")
    link_rate: float | None = Field(default=None, gt=0.0, description="state tokens/s the link moves")
    link_burst: float | None = Field(default=None, gt=0.0, description="the link bucket's depth")
    voluntary: VoluntarySpec | None = Field(
        default=None, description="the voluntary channel's crossover prices (absent: no voluntary eviction)"
    )

    @model_validator(mode="after")
    def _check_pair(self) -> EvictionSpec:
        if (self.capacity is None) != (self.target is None):
            raise ValueError("capacity and target come together (the emergency channel needs both)")
        if self.voluntary is not None and self.capacity is None:
            raise ValueError("the voluntary channel needs capacity and target (it shares the planner)")
        return self


class FleetSpec(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """The fleet's engines and how old a routing view may be."""

    staleness: float = Field(gt=0.0, le=MAX_SPAN, description="seconds a p2c route's view stays fresh")
    engines: dict[Name, Slots] = Field(min_length=1, description="each engine's slots C_e")
