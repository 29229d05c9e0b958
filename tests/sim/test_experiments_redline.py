"""``rvguard experiment redline-alpha``: measured against a plain EWMA oracle; the command end to end."""

from __future__ import annotations

import json
import random
from pathlib import Path

from rvguard.cli import main
from rvguard.enforce.redline import HeadroomSample
from rvguard.sim.experiments_redline import alpha_sweep
from rvguard.sim.headroom_signal import SignalModel, quiet_run


def _oracle_fires(
    samples: list[HeadroomSample], alpha: float, h_min: float, margin: float, after: float
) -> bool:
    """A level-only redline written plainly (not the one under test): did it start firing after ``after``?"""
    h = None
    last = float("-inf")
    firing = False
    for s in samples:
        if s.t <= last:
            continue  # stale or duplicate: nothing changes
        last = s.t
        h = s.value if h is None else alpha * s.value + (1 - alpha) * h
        if not firing and h < h_min:
            firing = True
            if s.t >= after:
                return True
        elif firing and h >= h_min + margin:
            firing = False
    return False


def test_false_triggers_agree_with_a_plain_ewma() -> None:
    model = SignalModel(glitch_rate=0.05)
    result = alpha_sweep(alphas=(0.2, 0.5, 0.7, 0.9), reps=30, samples=120, seed=3, model=model, warmup=10)
    for point in result.points:
        fired = 0
        for rep in range(30):
            rng = random.Random(f"redline-alpha:3:{rep}")
            fired += _oracle_fires(quiet_run(model, rng, 120), point.alpha, 0.2, 0.05, 10 * model.period)
        assert point.false_trigger == fired / 30, point.alpha


def test_without_noise_or_glitches_nothing_triggers_falsely_and_lag_falls_with_alpha() -> None:
    model = SignalModel(noise=0.0, glitch_rate=0.0)
    result = alpha_sweep(alphas=(0.1, 0.3, 0.6, 1.0), reps=5, samples=120, seed=0, model=model)
    assert [p.false_trigger for p in result.points] == [0.0] * 4
    lags = [p.lag_median for p in result.points]
    assert all(x is not None for x in lags)
    assert lags == sorted(lags, reverse=True) and lags[0] > lags[-1]  # type: ignore[type-var]
    assert result.recommended == 1.0


def test_the_same_seed_gives_the_same_sweep() -> None:
    a = alpha_sweep(alphas=(0.3, 0.8), reps=4, samples=80, seed=7)
    b = alpha_sweep(alphas=(0.3, 0.8), reps=4, samples=80, seed=7)
    assert a.points == b.points


def test_the_command_writes_json_and_a_plot(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "plots"
    code = main(
        [
            "experiment",
            "redline-alpha",
            "--reps",
            "3",
            "--samples",
            "60",
            "--warmup",
            "5",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["experiment"] == "redline-alpha" and len(doc["conditions"]) == 20
    assert {"params", "reps", "false_trigger", "false_trigger_ci", "lag_median"} <= doc["conditions"][
        0
    ].keys()
    assert (out / "redline-alpha.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_options_exit_2(tmp_path: Path) -> None:
    assert main(["redline-alpha", "--reps", "0", "--out", str(tmp_path)]) == 2
    assert main(["redline-alpha", "--samples", "30", "--warmup", "20", "--out", str(tmp_path)]) == 2
    assert main(["redline-alpha", "--glitch-rate", "2", "--out", str(tmp_path)]) == 2
