"""An independent oracle for floor entitlement: fractions from the decimal strings as written.

It imports nothing from rvguard: no weight, window or entitlement code. A
contract's floors and token weights, its epoch and window, and each
arrival's time are given as the decimal strings a file would hold; every
sum and comparison is done on `fractions.Fraction` values of those strings.
The rule it states (DESIGN §1, README "The contract"): window k is
``[epoch + k·W, epoch + (k+1)·W)``; a request is entitled when its tenant's
credit in its window, itself included, is at most the floor B (> 0); a
request's credit is 1 (count credits) or ``prompt · prompt_tokens + output ·
min(max_tokens, cap)`` with a missing max_tokens meaning the cap, and at least one token
of each (a missing or zero prompt counts one: `rvguard verify` assumes no request weighs less).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class OracleArrival:
    rid: str
    tenant: str
    t: str  # the decimal as written in the trace
    prompt_tokens: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class OracleContract:
    floors: dict[str, str]
    epoch: str
    window: str
    credit: str = "count"
    prompt: str = "1"
    output: str = "1"
    output_cap: int = 48


def window_of(c: OracleContract, t: str) -> int:
    return math.floor((Fraction(t) - Fraction(c.epoch)) / Fraction(c.window))


def weight_of(c: OracleContract, a: OracleArrival) -> Fraction:
    if c.credit == "count":
        return Fraction(1)
    capped = c.output_cap if a.max_tokens is None else min(a.max_tokens, c.output_cap)
    return Fraction(c.prompt) * max(a.prompt_tokens or 0, 1) + Fraction(c.output) * max(capped, 1)


def entitled(c: OracleContract, arrivals: list[OracleArrival]) -> dict[str, tuple[int, bool]]:
    """rid -> (window, entitled), arrivals taken in the order given (the trace's)."""
    used: dict[tuple[str, int], Fraction] = {}
    out = {}
    for a in arrivals:
        k = window_of(c, a.t)
        key = (a.tenant, k)
        used[key] = used.get(key, Fraction(0)) + weight_of(c, a)
        floor = Fraction(c.floors[a.tenant])
        out[a.rid] = (k, floor > 0 and used[key] <= floor)
    return out
