"""The closing bound by default; the refuted backlog assumption only on request, and said so."""

from __future__ import annotations

import io

import pytest

from rvguard.contract import Contract, contract_from_mapping
from rvguard.verify.encoding import VerifyOptions
from rvguard.verify.preconditions import verify_contract


def straddle_case(deadline: float, floor: int = 4) -> Contract:
    # the enforcer's regression case test_issue_window_straddle: C=2, B=4, W=1, s=0.5, rho_a=1
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 2,
            "service": {"s_max": 0.5, "s_max_opp": 0.5},
            "tenants": {
                "a": {"floor": floor, "deadline": deadline},
                "o": {"floor": 0, "deadline": 9, "tier": 1},
            },
        }
    )


def by_name(contract: Contract, options: VerifyOptions) -> dict[str, bool]:
    return {r.name: r.holds for r in verify_contract(contract, options=options)}


CALIBRATED = {"s_max": 0.2, "floor": 10, "slots": 4, "deadline": 1.0}


def calibrated(deadline: float = 1.0) -> Contract:
    """The contract calibrated on the real engine: s_max 0.2 s, B = 10 per 1 s, C = 4, D = 1.0 s."""
    return contract_from_mapping(
        {
            "window": 1.0,
            "slots": 4,
            "service": {"s_max": 0.2, "s_max_opp": 0.2},
            "tenants": {
                "a": {"floor": 10, "deadline": deadline},
                "o": {"floor": 0, "deadline": 9, "tier": 1},
            },
        }
    )


def test_the_calibrated_contract_is_rejected_by_default() -> None:
    """Two windows' floors can queue (20 ahead): 0.2 + ⌈20/4⌉·0.2 = 1.2 s > 1.0 s."""
    assert by_name(calibrated(), VerifyOptions())["deadline[a]"] is False
    assert by_name(calibrated(), VerifyOptions(backlog_assumption=True))["deadline[a]"] is True


def test_the_published_bound_admits_the_straddle_counterexample_only_when_assumed() -> None:
    assert by_name(straddle_case(1.5), VerifyOptions(backlog_assumption=True))["deadline[a]"] is True
    assert by_name(straddle_case(1.5), VerifyOptions())["deadline[a]"] is False


def test_at_rho_one_no_deadline_is_proven() -> None:
    """ρ_a = 1 (B·s = C·W): each window adds one window of work to the bound, which never closes."""
    for d in (1.0, 2.5, 4.5, 10.0):
        assert by_name(straddle_case(d), VerifyOptions())["deadline[a]"] is False
    assert by_name(straddle_case(1.0, floor=1), VerifyOptions())["deadline[a]"] is True  # 0.5 + ⌈2/2⌉·0.5


@pytest.mark.parametrize("flag", ["--assume-backlog", None])
def test_the_verdict_line_says_when_it_rests_on_the_assumption(flag: str | None) -> None:
    import contextlib
    import tempfile
    from pathlib import Path

    from rvguard.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "c.yaml"
        spec.write_text(
            "window: 1.0\nslots: 4\nservice: {s_max: 0.2, s_max_opp: 0.2}\n"
            "tenants:\n  a: {floor: 10, deadline: 1.0}\n  o: {floor: 0, deadline: 9, tier: 1}\n"
        )
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["verify", str(spec), *([flag] if flag else [])])
    head = out.getvalue().splitlines()[0]
    if flag == "--assume-backlog":
        assert code == 0 and "proven only under the backlog assumption" in head
    else:
        assert code == 1 and "outside the proven region" in head
    assert err.getvalue() == ""


def test_the_removed_no_op_flag_is_refused() -> None:
    """``--no-backlog-assumption`` (a no-op the closing bound made redundant) never shipped in a
    release: it is an unknown option, not a silent no-op."""
    import contextlib

    from rvguard.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["verify", "c.yaml", "--no-backlog-assumption"])
    assert code == 2 and "unrecognized arguments: --no-backlog-assumption" in err.getvalue()
