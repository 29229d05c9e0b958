"""The experiments' contract and load: the reference study's marquee, paced or Poisson.

The marquee (specs/marquee.yaml, embedded here so `rvguard demo` runs from
an installed package): C = 4, W = 1 s, assured floor B = 6 with D = 1.82 s,
opportunistic unfloored. Its load: the floored tenants at their floor rate
Σ B/W for 12 s (≈ 72 assured a run, the study's count), **paced** by
default — evenly spaced, so no window holds more than B, as the study's
"none rejected" implies — or Poisson (``assured="poisson"``, the variant
reported beside it); the unfloored tenants a Poisson flood of 14/s
(20/s offered against μ_sat ≈ 9.6/s).

Each rep draws its arrivals from ``random.Random(f"arrivals:{seed}:{rep}")``
once; every condition replays that list (the paired design).
"""

from __future__ import annotations

import random
from typing import Any

from ..contract import contract_from_mapping
from ..enforce.request import Request
from ..errors import SpecError
from .workloads import floor_rate, paced, poisson

__all__ = ["ASSURED_STREAMS", "MARQUEE", "MARQUEE_CONTRACT", "marquee_arrivals"]

MARQUEE: dict[str, float] = {"opp_rate": 14.0, "duration": 12.0}
ASSURED_STREAMS = ("paced", "poisson")
MARQUEE_CONTRACT = contract_from_mapping(
    {
        "window": 1.0,
        "slots": 4,
        "output_cap": 48,
        "service": {"s_max": 0.66, "s_max_opp": 0.66, "lower": 0.236},
        "tenants": {
            "assured": {"floor": 6, "deadline": 1.82, "tier": 0},
            "opportunistic": {"floor": 0, "deadline": 1.82, "tier": 1},
        },
    },
    source="marquee",
)


def marquee_arrivals(contract: Any, seed: int, rep: int, **load: Any) -> list[Request]:
    """Rep ``rep``'s arrivals at the marquee load (keywords override it; module doc).

    Keywords: ``assured`` (``paced`` | ``poisson``), ``assured_rate``
    (default Σ B/W), ``opp_rate``, ``duration``, ``tokens``.

    Raises:
        SpecError: an unknown ``assured`` stream, or as the generators.
    """
    spec: dict[str, Any] = {"assured_rate": floor_rate(contract), "assured": "paced", **MARQUEE, **load}
    kind = spec.pop("assured")
    if kind not in ASSURED_STREAMS:
        raise SpecError(f"assured stream must be one of {ASSURED_STREAMS}, got {kind!r}", field="assured")
    rng = random.Random(f"arrivals:{seed}:{rep}")
    make = paced if kind == "paced" else poisson
    return make(contract, rng, **spec)
