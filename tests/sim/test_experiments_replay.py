"""trace-replay on the bundled public traces: guard (reject, demote) vs admit-all, short replays."""

from __future__ import annotations

import pytest

from rvguard.errors import SpecError
from rvguard.sim.experiments_replay import REPLAY_CONTRACT, TRACES, trace_replay, traces_dir


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return trace_replay(REPLAY_CONTRACT, reps=1, seed=0, duration=60.0)


def test_every_trace_under_every_arm(result) -> None:  # type: ignore[no-untyped-def]
    cells = {(c.params["trace"], c.params["arm"]) for c in result.conditions}
    assert cells == {(t, a) for t in TRACES for a in ("guard-reject", "guard-demote", "admit-all")}
    regimes = {c.params["trace"]: c.params["regime"] for c in result.conditions}
    assert regimes == {"azure_code": "bursty", "azure_conv": "calm", "mooncake": "batched"}


def test_guard_vs_admit_all_and_demote(result) -> None:  # type: ignore[no-untyped-def]
    by = {(c.params["trace"], c.params["arm"]): c for c in result.conditions}
    for trace in TRACES:
        reject, demote, admit = by[trace, "guard-reject"], by[trace, "guard-demote"], by[trace, "admit-all"]
        assert reject.dr_wf_violations == demote.dr_wf_violations == reject.af_violations == 0
        # the guard's floor all attains; admit-all drowns it (the study: 1.00 vs 0.08–0.13)
        assert reject.floor_attainment == 1.0
        assert (admit.floor_attainment or 0.0) < 0.5
        # reject's unmet is burst excess only (no admitted request missed); demote admits that excess
        assert reject.assured_miss == 0.0 and (reject.offered_unmet or 0.0) > 0.0
        assert sum(demote.judged) > sum(reject.judged)
        assert (admit.offered_unmet or 0.0) > (reject.offered_unmet or 0.0)
        for c in (reject, demote):
            d = c.to_dict()
            assert d["phase_worst_attainment"] is not None
            assert d["phase_worst_attainment"] <= d["floor_attainment"] + 1e-12


def test_missing_traces_name_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RVGUARD_TRACES", str(tmp_path))
    with pytest.raises(SpecError, match="RVGUARD_TRACES"):
        traces_dir()


def test_the_bundled_slices_serve_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RVGUARD_TRACES", raising=False)
    for file, _ in TRACES.values():
        assert (traces_dir() / file).is_file()
