"""``rvguard calibrate``: measure an upstream's service times, suggest a service envelope.

The contract's envelope (DESIGN §1) needs engine-specific numbers: a lower
bound L(ℓ) for doom-sound drops and a ceiling s_max for the floor's
preconditions. This module measures the service time (client side: request
sent → last byte) of batches of 1 and of C concurrent requests at several
output lengths ℓ (``ignore_eos`` and ``min_tokens`` make each request
generate exactly ℓ tokens), then fits ``a + b·ℓ``:

* ``lower``: through the per-ℓ *minima* at batch 1, its base then lowered
  until the line is below every sample at every batch size (L must not
  exceed any true service, or DR drops become unsound);
* ``upper``: through the per-ℓ *p99* at batch C, its base raised until the
  line is above every per-ℓ maximum; ``s_max`` is ``upper`` at the output
  cap (extrapolated when the cap is beyond the longest ℓ measured — said so).

It is a measurement on one machine at one time, not a bound: the watch
(`rvguard.enforce.watch`) checks it online.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..clock import MonotonicClock
from ..enforce.dispatchers import DispatchError
from ..errors import MissingExtraError, SpecError
from .upstream import upstream_url

__all__ = ["Calibration", "Line", "calibrate", "fit_line", "percentile"]


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0–100) by linear interpolation between order statistics."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Line:
    """``base + per_token · ℓ`` seconds."""

    base: float
    per_token: float

    def at(self, tokens: float) -> float:
        """The line's value at ``tokens``."""
        return self.base + self.per_token * tokens


def fit_line(points: Sequence[tuple[float, float]]) -> Line:
    """Least squares through ``points`` (one point: a flat line); slope clamped at ≥ 0."""
    if not points:
        raise ValueError("fit_line needs at least one point")
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
    b = max(0.0, b)
    return Line(my - b * mx, b)


@dataclass(frozen=True)
class Calibration:
    """Samples by (batch, ℓ) and the envelope fitted from them (see module doc)."""

    upstream: str
    model: str
    slots: int
    output_cap: int
    samples: dict[int, dict[int, list[float]]] = field(default_factory=dict)

    def lower(self) -> Line:
        """L(ℓ): the slope of the batch-1 minima, the largest base ≥ 0 that keeps it ≤ every sample.

        Exactly ≤ (DR's soundness rests on it): the last step walks the line
        down by ulps if float rounding left it a hair above a sample.
        """
        points = [(ell, x) for by in self.samples.values() for ell, xs in by.items() for x in xs]
        slope = fit_line([(ell, min(xs)) for ell, xs in self.samples[1].items()]).per_token
        base = min(x - slope * ell for ell, x in points)
        if base < 0.0:  # keep L ≥ 0: flatten the slope instead of going negative
            base, slope = 0.0, min([slope] + [x / ell for ell, x in points if ell > 0])
        line = Line(base, slope)
        while any(line.at(ell) > x for ell, x in points):
            if line.base > 0.0:
                line = Line(max(0.0, math.nextafter(line.base, -math.inf)), line.per_token)
            else:
                line = Line(0.0, math.nextafter(line.per_token, 0.0))
        return line

    def upper(self) -> Line:
        """U(ℓ): through batch-C p99, raised (exactly, by ulps if need be) to ≥ every batch-C maximum.

        Never below L: base and slope are at least L's, so U ≥ L for every ℓ ≥ 0
        (fitted apart, the two lines could cross before the output cap, which a
        contract refuses as inverted bounds).
        """
        full = self.samples[self.slots]
        line = fit_line([(ell, percentile(xs, 99)) for ell, xs in full.items()])
        excess = max(max(xs) - line.at(ell) for ell, xs in full.items())
        lo = self.lower()
        line = Line(max(line.base + max(0.0, excess), lo.base), max(line.per_token, lo.per_token))
        while any(line.at(ell) < max(xs) for ell, xs in full.items()):
            line = Line(math.nextafter(line.base, math.inf), line.per_token)
        return line

    def to_dict(self) -> dict[str, Any]:
        """Everything: the per-cell percentiles and the suggestion."""
        cells = [
            {
                "batch": batch,
                "tokens": ell,
                "n": len(xs),
                "min": min(xs),
                "p50": percentile(xs, 50),
                "p99": percentile(xs, 99),
                "max": max(xs),
            }
            for batch, by in sorted(self.samples.items())
            for ell, xs in sorted(by.items())
        ]
        lo, up = self.lower(), self.upper()
        longest = max(self.samples[self.slots])
        return {
            "upstream": self.upstream,
            "model": self.model,
            "slots": self.slots,
            "measurements": cells,
            "percentiles": {
                "lower": "min at batch 1, below every sample",
                "upper": f"p99 at batch {self.slots}",
            },
            "service": {  # µs resolution, rounded away from the samples: L down, U and s_max up
                "s_max": _round(up.at(self.output_cap), up=True),
                "s_max_opp": _round(up.at(self.output_cap), up=True),
                "lower": {"base": _round(lo.base, up=False), "per_token": _round(lo.per_token, up=False)},
                "upper": {"base": _round(up.base, up=True), "per_token": _round(up.per_token, up=True)},
            },
            "output_cap": self.output_cap,
            "extrapolated": self.output_cap > longest,
        }

    def to_yaml(self) -> str:
        """The suggestion as a contract fragment, with how it was measured in comments."""
        import yaml

        d = self.to_dict()
        head = [
            f"# rvguard calibrate: {self.upstream} model={self.model!r}, batch 1 and {self.slots}",
            f"# lower: {d['percentiles']['lower']}",
            f"# upper: {d['percentiles']['upper']}, raised above every max",
            f"# s_max = upper at output_cap {self.output_cap}"
            + (" (extrapolated beyond the longest ℓ measured)" if d["extrapolated"] else ""),
        ]
        for c in d["measurements"]:
            head.append(
                f"#   batch {c['batch']:>3} ℓ={c['tokens']:>4} n={c['n']:>3} "
                f"min {c['min']:.4f}  p50 {c['p50']:.4f}  p99 {c['p99']:.4f}  max {c['max']:.4f}"
            )
        body = yaml.safe_dump({"service": d["service"]}, sort_keys=False)
        return "\n".join(head) + "\n" + body


def _round(x: float, *, up: bool) -> float:
    """``x`` at 10⁻⁶ resolution, rounded up or down (never toward the samples it bounds)."""
    r = (math.ceil if up else math.floor)(x * 1e6) / 1e6
    while (r < x) if up else (r > x):  # float products can land one step off
        r = math.nextafter(r, math.inf if up else -math.inf)
    return r


async def _first_model(client: Any, upstream: str) -> str:
    resp = await client.get(upstream + "/v1/models")
    data = resp.json().get("data") or []
    if resp.status_code != 200 or not data:
        raise DispatchError(f"upstream lists no model (http {resp.status_code})", status_hint=502)
    return str(data[0]["id"])


async def _one(client: Any, url: str, body: dict[str, Any], clock: MonotonicClock) -> float:
    start = clock.now()
    resp = await client.post(url, json=body)
    if resp.status_code != 200:
        raise DispatchError(f"upstream http {resp.status_code}: {resp.text[:200]}", status_hint=502)
    return clock.now() - start


def _check_args(slots: int, lengths: Sequence[int], reps: int) -> None:
    if slots < 1:
        raise SpecError(f"slots must be ≥ 1, got {slots}", field="slots", value=slots)
    if not lengths or min(lengths) < 1:
        raise SpecError(f"lengths must be ≥ 1, got {list(lengths)}", field="lengths", value=list(lengths))
    if reps < 1:
        raise SpecError(f"reps must be ≥ 1, got {reps}", field="reps", value=reps)


async def calibrate(
    upstream: str,
    *,
    model: str | None = None,
    slots: int = 4,
    lengths: Sequence[int] = (1, 8, 16, 32),
    reps: int = 5,
    output_cap: int = 48,
    prompt: str = "Calibrate the service envelope.",
    api_key: str | None = None,
) -> Calibration:
    """Measure batches of 1 and ``slots`` at each length, ``reps`` times; fit the envelope.

    ``api_key`` is sent as ``Authorization: Bearer`` (an engine started with ``--api-key``).

    Raises:
        SpecError: bad arguments.
        DispatchError: the upstream is unreachable or answers with an error (exit 2 in the CLI).
    """
    _check_args(slots, lengths, reps)
    try:
        import httpx
    except ImportError:  # pragma: no cover - the gateway extra brings httpx
        raise MissingExtraError("httpx", "gateway") from None
    base = upstream_url(upstream)
    clock = MonotonicClock()
    try:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else None
        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=5.0), headers=headers) as client:
            name = model or await _first_model(client, base)
            result = Calibration(base, name, slots, output_cap)
            url = base + "/v1/completions"
            for batch in sorted({1, slots}):
                by = result.samples.setdefault(batch, {})
                for ell in lengths:
                    body = {
                        "model": name,
                        "prompt": prompt,
                        "max_tokens": ell,
                        "min_tokens": ell,
                        "ignore_eos": True,
                    }
                    await _one(client, url, body, clock)  # warm this shape up
                    for _ in range(reps):
                        times = await asyncio.gather(*(_one(client, url, body, clock) for _ in range(batch)))
                        by.setdefault(ell, []).extend(times)
    except httpx.TransportError as exc:
        raise DispatchError(f"cannot reach {base}: {type(exc).__name__}: {exc}", status_hint=502) from exc
    return result
