"""trace-replay on the bundled public traces: reject vs demote, attainment and the phase sweep."""

from __future__ import annotations

import pytest

from rvguard.errors import SpecError
from rvguard.sim.experiments_replay import REPLAY_CONTRACT, TRACES, trace_replay, traces_dir


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return trace_replay(REPLAY_CONTRACT, reps=1, seed=0)


def test_every_trace_under_both_regulators(result) -> None:  # type: ignore[no-untyped-def]
    cells = {(c.params["trace"], c.params["excess"]) for c in result.conditions}
    assert cells == {(t, e) for t in TRACES for e in ("reject", "demote")}
    regimes = {c.params["trace"]: c.params["regime"] for c in result.conditions}
    assert regimes == {"azure_code": "bursty", "azure_conv": "calm", "mooncake": "calm"}


def test_reject_vs_demote(result) -> None:  # type: ignore[no-untyped-def]
    by = {(c.params["trace"], c.params["excess"]): c for c in result.conditions}
    for trace in TRACES:
        reject, demote = by[trace, "reject"], by[trace, "demote"]
        assert sum(reject.violations) == sum(demote.violations) == 0  # AF, DR, WF hold on replays
        # demoted excess is admitted at opportunistic rank and counts as admitted assured work
        assert sum(demote.judged) > sum(reject.judged)
        assert (demote.assured_miss or 0.0) >= (reject.assured_miss or 0.0)
        for c in (reject, demote):
            worst = c.extras["phase_worst_attainment"]
            assert worst is not None and worst <= c.extras["floor_attainment"] + 1e-12


def test_bursty_trace_is_origin_sensitive(result) -> None:  # type: ignore[no-untyped-def]
    by = {(c.params["trace"], c.params["excess"]): c for c in result.conditions}
    bursty = by["azure_code", "reject"].extras["phase_worst_attainment"]
    calm = by["azure_conv", "reject"].extras["phase_worst_attainment"]
    assert bursty < calm


def test_missing_traces_name_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RVGUARD_TRACES", str(tmp_path))
    with pytest.raises(SpecError, match="RVGUARD_TRACES"):
        traces_dir()


def test_the_bundled_slices_serve_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RVGUARD_TRACES", raising=False)
    for file, _ in TRACES.values():
        assert (traces_dir() / file).is_file()
