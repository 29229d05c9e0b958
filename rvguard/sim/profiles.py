"""Backend profiles: the study's 2×V100 node, and the real vLLM CPU engine via ``rvguard calibrate``.

Why two: the simulator's numbers are only as good as its calibration, and
the study's figures come from hardware we do not have. The second profile
is fitted to an engine we do run (the tiny random-weight Llama on vLLM's
CPU backend the end-to-end tests use), from the measurements ``rvguard
calibrate --json`` prints, so the simulator can be checked against real
runs of the same experiments (``rvguard experiment NAME --backend URL``).

`profile_from_calibration` reads that JSON: least-squares lines through the
per-ℓ medians at batch 1 (``a1 + b1·ℓ``) and at batch C (``aC + bC·ℓ``)
give the model directly — step times τ(1) = b1 and τ(C) = bC (linear in
the batch between), one prefill π = (aC − a1)/(C − 1) (C prefills precede a
batch started together, one a lone request), the rest of a1 the per-request
overhead; the noise σ from the cells' p99/p50 ratio. Prompt length is not
varied by calibrate, so ``prefill_per_token`` stays 0 in a fitted profile.

`time_scale` is the ratio of a profile's clean batch-C service (at 16
tokens, or the length a live run asks for) to the study's at 16 tokens
(421 ms): how much slower (or faster) the engine runs the same regime;
`scale_contract` stretches a contract's times by it, so an experiment's
load and deadlines keep the study's proportions on another engine.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..contract import Contract
from ..errors import SpecError
from .backend import BackendModel

__all__ = [
    "PROFILES",
    "STUDY",
    "VLLM_CPU",
    "load_profile",
    "profile_from_calibration",
    "scale_contract",
    "time_scale",
]

STUDY = BackendModel()
Z99 = 2.326  # standard normal 99th percentile: σ ≈ ln(p99/p50)/z for a lognormal


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def profile_from_calibration(doc: Mapping[str, Any], *, name: str = "vllm-cpu") -> BackendModel:
    """A `BackendModel` fitted to ``rvguard calibrate --json`` output (module doc).

    Raises:
        SpecError: the document lacks batch-1 or batch-C cells at two lengths or more.
    """
    slots = int(doc.get("slots", 0))
    cells = doc.get("measurements") or []
    by: dict[int, list[tuple[float, float]]] = {}
    for c in cells:
        by.setdefault(int(c["batch"]), []).append((float(c["tokens"]), float(c["p50"])))
    if slots < 2 or len(by.get(1, [])) < 2 or len(by.get(slots, [])) < 2:
        raise SpecError(
            "a profile needs calibrate measurements at batch 1 and batch C (≥ 2) at two lengths or more",
            field="measurements",
        )
    a1, b1 = _line(by[1])
    ac, bc = _line(by[slots])
    per_seq = max(0.0, (bc - b1) / (slots - 1))
    prefill = max(0.0, (ac - a1) / (slots - 1))
    ratios = [c["p99"] / c["p50"] for c in cells if c["p50"] > 0 and c["p99"] >= c["p50"]]
    sigma = min(0.5, max(0.01, math.log(statistics.median(ratios)) / Z99)) if ratios else 0.05
    return BackendModel(
        slots=slots,
        overhead=max(0.0, a1 - prefill),
        prefill=prefill,
        step=max(b1 - per_seq, 1e-6),
        step_per_seq=per_seq,
        sigma=round(sigma, 4),
        min_factor=0.8,
        max_factor=1.6,
        name=name,
    )


# Fitted by `profile_from_calibration` to docs/engine/calibrate.json (``rvguard calibrate --json`` on
# the tiny-llama vLLM CPU engine, C = 4); tests/sim/test_profiles.py holds this copy to that file.
VLLM_CPU = BackendModel(
    slots=4,
    overhead=0.002197869541479944,
    prefill=0.014397855343784493,
    step=0.0008039664649163201,
    step_per_seq=0.0001168175683795445,
    sigma=0.3205,
    min_factor=0.8,
    max_factor=1.6,
    name="vllm-cpu",
)

PROFILES: dict[str, BackendModel] = {"study-v100": STUDY, "vllm-cpu": VLLM_CPU}


def load_profile(spec: str) -> BackendModel:
    """A profile by name (`PROFILES`) or from a ``rvguard calibrate --json`` file.

    Raises:
        SpecError: neither a known name nor a readable calibration file.
    """
    if spec in PROFILES:
        return PROFILES[spec]
    path = Path(spec)
    if not path.is_file():
        raise SpecError(
            f"--profile {spec!r}: not one of {', '.join(PROFILES)} nor a calibrate --json file",
            field="--profile",
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SpecError(f"--profile {spec}: cannot read it as JSON: {err}", field="--profile") from err
    return profile_from_calibration(doc, name=path.stem)


def time_scale(model: BackendModel, *, tokens: int = 16, reference: BackendModel = STUDY) -> float:
    """``model``'s clean batch-C service at ``tokens`` over ``reference``'s at 16 (the study's regime)."""
    return model.mean_base(tokens, model.slots) / reference.mean_base(16, reference.slots)


def _scaled_bound(bound: Any, k: float) -> Any:
    return None if bound is None else {"base": bound.base * k, "per_token": bound.per_token * k}


def scale_contract(contract: Contract, k: float) -> Contract:
    """``contract`` with every time (epoch, window, deadlines, service envelope) multiplied by ``k``.

    Raises:
        SpecError: ``k`` not a finite positive number.
    """
    if not (math.isfinite(k) and k > 0):
        raise SpecError(f"time scale must be a finite number > 0, got {k!r}", field="scale")
    svc = contract.service
    service = svc.model_copy(
        update={
            "s_max": svc.s_max * k,
            "s_max_opp": None if svc.s_max_opp is None else svc.s_max_opp * k,
            "lower": type(svc.lower).model_validate(_scaled_bound(svc.lower, k)),
            "upper": None
            if svc.upper is None
            else type(svc.upper).model_validate(_scaled_bound(svc.upper, k)),
        }
    )
    tenants = {
        n: t.model_copy(
            update={"deadline": t.deadline * k, "s_max": None if t.s_max is None else t.s_max * k}
        )
        for n, t in contract.tenants.items()
    }
    return contract.model_copy(
        update={
            "epoch": contract.epoch * k,
            "window": contract.window * k,
            "service": service,
            "tenants": tenants,
        }
    )
