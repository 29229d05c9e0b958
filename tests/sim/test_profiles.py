"""Backend profiles: the CPU engine's, fitted from the committed calibrate run; contract scaling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.errors import SpecError
from rvguard.sim.backend import BackendModel
from rvguard.sim.profiles import (
    STUDY,
    VLLM_CPU,
    load_profile,
    profile_from_calibration,
    scale_contract,
    time_scale,
)

from ._common import MARQUEE

CALIBRATE = Path(__file__).resolve().parents[2] / "docs" / "engine" / "calibrate.json"


def test_embedded_cpu_profile_is_the_fit_of_the_committed_calibrate_run() -> None:
    doc = json.loads(CALIBRATE.read_text())
    assert profile_from_calibration(doc) == VLLM_CPU
    assert load_profile(str(CALIBRATE)) == profile_from_calibration(doc, name="calibrate")


def test_fit_recovers_a_known_engine() -> None:
    """Measurements generated from a known noiseless engine give it back (step times, prefill, overhead)."""
    truth = BackendModel(overhead=0.01, prefill=0.03, step=0.005, step_per_seq=0.001, sigma=0.0)
    cells = [
        {"batch": n, "tokens": ell, "p50": truth.mean_base(ell, n), "p99": truth.mean_base(ell, n)}
        for n in (1, 4)
        for ell in (1, 16, 64)
    ]
    fit = profile_from_calibration({"slots": 4, "measurements": cells})
    for field in ("overhead", "prefill", "step", "step_per_seq"):
        assert getattr(fit, field) == pytest.approx(getattr(truth, field), rel=1e-6, abs=1e-9), field
    assert fit.sigma == 0.01  # no dispersion measured: the floor


def test_fit_refuses_a_calibration_without_two_batch_sizes() -> None:
    with pytest.raises(SpecError, match="batch 1 and batch C"):
        profile_from_calibration(
            {"slots": 4, "measurements": [{"batch": 1, "tokens": 1, "p50": 0.1, "p99": 0.1}]}
        )


def test_load_profile_by_name_or_file(tmp_path: Path) -> None:
    assert load_profile("study-v100") is STUDY and load_profile("vllm-cpu") is VLLM_CPU
    with pytest.raises(SpecError, match="--profile"):
        load_profile(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(SpecError, match="cannot read it as JSON"):
        load_profile(str(bad))


def test_scale_contract_multiplies_every_time() -> None:
    c = scale_contract(MARQUEE, 2.0)
    assert c.window == 2.0 and c.service.s_max == pytest.approx(1.32)
    assert c.service.lower.base == pytest.approx(0.472)
    assert {n: t.deadline for n, t in c.tenants.items()} == {"assured": 3.64, "opportunistic": 3.64}
    assert {n: t.floor for n, t in c.tenants.items()} == {
        "assured": 6,
        "opportunistic": 0,
    }  # counts unchanged
    with pytest.raises(SpecError, match="time scale"):
        scale_contract(MARQUEE, 0.0)


def test_time_scale() -> None:
    assert time_scale(STUDY) == 1.0
    assert time_scale(VLLM_CPU) < time_scale(VLLM_CPU, tokens=128)
