"""Exact arithmetic where a verdict turns on equality: floor credits and window edges.

Theory of operation
-------------------
A contract's numbers and a trace's times are written as decimals (YAML,
JSON, CSV). Read into binary floats they are only near those decimals, and
sums and products of floats drift: with ``floor: 0.3`` and token weights
``0.1``, the float sum 0.1 + 0.2 = 0.30000000000000004 exceeds 0.3, and
0.3 / 0.1 = 2.9999999999999996 puts the window edge 0.3 into window 2. Where
the answer hangs on such an equality, rvguard decides on the decimals
themselves:

* `decimal` is a number's exact value: the decimal it is written as. A
  float's shortest ``repr`` gives that decimal back (it round-trips), so
  ``Fraction(repr(x))`` is the value the user wrote. `rvguard verify` reads
  contract numbers into Z3 the same way.
* **Credits** are counted in whole units (`CreditUnits`): one unit is
  1/scale credit, scale the least common denominator of the floors and the
  token weights as decimals (1 with count credits). A request's weight, a
  window's credit used and a floor are then integers, summed and compared
  exactly, as fast as floats, and vectorised exactly offline (int64 while
  the sums stay below 2^53, Python ints beyond). Integer units rather than
  `Fraction` objects: the same exactness at the cost of an int addition on
  the core's and the monitor's hot path, and numpy can sum them.
* **Credited headroom**: the eviction rule "no emergency eviction while the
  credited headroom already reaches the target" is an equality too (headroom
  0.29, one credited eviction of 10 tokens of 1000, target 0.3: exactly
  0.30, reached); `tokens_short` decides it on the decimals, in tokens, for
  the planner and for EV alike.
* **Window edges**: window k is ``[epoch + k·W, epoch + (k+1)·W)`` with
  epoch, W and the time read as decimals, so an arrival written exactly at
  an edge ``epoch + k·W`` is in window k, the window it opens. Away from an
  edge the float quotient decides (it cannot be wrong there); within
  `EDGE_TOLERANCE` of one, `window_index` decides with fractions. The
  offline path vectorises the estimate and sends the rows near an edge to
  `window_index` (`near_edge` is the one test of "near", for both).

Pure: the standard library only.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, overload

__all__ = [
    "EDGE_TOLERANCE",
    "MIN_TOKENS",
    "CreditUnits",
    "credit_units",
    "decimal",
    "near_edge",
    "tokens_short",
    "window_index",
]

#: the fewest prompt (and output) tokens a request is charged with token credits (`CreditUnits.weight`);
#: `rvguard verify`'s w_min assumes it (``VerifyOptions.min_prompt_tokens``)
MIN_TOKENS = 1

#: distance of ``(t - epoch) / W`` to a whole number, relative to ``1 + (|t| + |epoch|) / W``, within
#: which `window_index` decides exactly: 64 float epsilons, well above the few the quotient can be
#: off by (t, epoch and W each within half an epsilon of their decimals, one subtraction, one division)
EDGE_TOLERANCE = 64 * sys.float_info.epsilon


def decimal(value: float) -> Fraction:
    """The exact value of a number read from a file: the decimal it is written as."""
    if isinstance(value, int):
        return Fraction(value)
    return Fraction(repr(float(value)))


def tokens_short(target: float, headroom: float, capacity: int, credited: int) -> Fraction:
    """State tokens still to free before ``headroom`` plus ``credited`` state tokens (of a resource
    of ``capacity`` tokens) reach ``target``: ``(target − headroom)·capacity − credited`` on the
    decimals (≤ 0: the target is reached, exactly at a tie)."""
    return (decimal(target) - decimal(headroom)) * capacity - credited


def _tolerance(t: Any, origin: float, window: float) -> Any:
    return EDGE_TOLERANCE * (1 + (abs(t) + abs(origin)) / window)


def near_edge(t: Any, origin: float, window: float) -> Any:
    """Whether ``t`` may sit on a window edge (a float, or a numpy array of them: elementwise).

    The offline path vectorises it; `window_index` applies the same test to its quotient.
    """
    q = (t - origin) / window
    frac = q - (q // 1)
    tol = _tolerance(t, origin, window)
    return (frac < tol) | (1 - frac < tol)


def window_index(t: float, origin: float, window: float) -> int:
    """Index k of the window ``[origin + k·W, origin + (k+1)·W)`` holding ``t``, exact at edges.

    Times and bounds are the decimals they are written as (`decimal`): a
    time written exactly at ``origin + k·W`` is in window k.
    """
    q = (t - origin) / window
    k = math.floor(q)
    frac = q - k
    tol = EDGE_TOLERANCE * (1 + (abs(t) + abs(origin)) / window)  # `_tolerance`, inline: the hot path
    if tol <= frac <= 1 - tol:
        return k
    return math.floor((decimal(t) - decimal(origin)) / decimal(window))


@dataclass(frozen=True, slots=True)
class CreditUnits:
    """Floor credits as whole numbers: one unit is ``1 / scale`` credit (see the module doc).

    Attributes:
        scale: units per credit.
        floors: each tenant's floor B, in units.
        prompt: units per prompt token (token credits; 0 with count credits).
        output: units per capped output token (token credits; 0 with count credits).
        count: count credits: every request weighs one unit (scale 1).
    """

    scale: int
    floors: Mapping[str, int]
    prompt: int
    output: int
    count: bool

    @overload
    def weight(self, prompt_tokens: int, capped_tokens: int) -> int: ...
    @overload
    def weight(self, prompt_tokens: Any, capped_tokens: Any) -> Any: ...
    def weight(self, prompt_tokens: Any, capped_tokens: Any) -> Any:
        """Units a request spends (ints, or numpy arrays alike): 1, or the weighted token count.

        With token credits every request is charged at least `MIN_TOKENS` prompt
        and output tokens (a missing or zero prompt size counts as the minimum):
        `rvguard verify` bounds the requests per window by ⌊B / w_min⌋ with that
        minimum, so a request may never weigh less.
        """
        if self.count:
            return 1 + 0 * capped_tokens
        prompt = prompt_tokens + (prompt_tokens < MIN_TOKENS) * (MIN_TOKENS - prompt_tokens)
        output = capped_tokens + (capped_tokens < MIN_TOKENS) * (MIN_TOKENS - capped_tokens)
        return self.prompt * prompt + self.output * output

    def credits(self, units: int) -> float:
        """``units`` in credits, as the float nearest the exact value."""
        return units / self.scale


def credit_units(floors: Mapping[str, float], prompt: float, output: float, *, count: bool) -> CreditUnits:
    """The unit of a contract's credits: exact for every floor and token weight as written."""
    exact = {name: decimal(f) for name, f in floors.items()}
    weights = [] if count else [decimal(prompt), decimal(output)]
    scale = math.lcm(1, *(v.denominator for v in (*exact.values(), *weights)))
    p, o = (int(w * scale) for w in weights) if weights else (0, 0)
    return CreditUnits(scale, MappingProxyType({n: int(v * scale) for n, v in exact.items()}), p, o, count)
