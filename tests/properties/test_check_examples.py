"""``rvguard check --property FILE`` on hand-made traces: each example's violating trace is caught
(the breaking request, its time, the edge's guard), and the same trace with that admission
refused as the gate refuses it (``property: NAME``) holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rvguard.cli import main

EX = Path(__file__).resolve().parents[2] / "examples" / "properties"
CONTRACT = EX / "run" / "contract.yaml"  # one unfloored tenant, acme; output cap 1024


def _arrive(t: float, rid: str, prompt: int = 100) -> dict[str, object]:
    return {
        "t": t,
        "kind": "arrive",
        "rid": rid,
        "tenant": "acme",
        "prompt_tokens": prompt,
        "max_tokens": 1024,
    }


def _admit(t: float, rid: str) -> dict[str, object]:
    return {"t": t, "kind": "admit", "rid": rid, "basis": "surplus"}


#: file, property, the trace, the breaking request, its time, a word of the guard it broke
CASES = [
    (
        "tenant_concurrency.yaml",
        "TENANT_CONCURRENCY",
        [r for i in range(3) for r in (_arrive(i / 10, f"r{i}"), _admit(i / 10, f"r{i}"))],
        "r2",
        0.2,
        "running + 1 <= k",
    ),
    (
        "tenant_tokens.yaml",
        "TENANT_TOKENS",
        [_arrive(0.0, "r0", 3000), _admit(0.0, "r0"), _arrive(0.1, "r1", 3000), _admit(0.1, "r1")],
        "r1",
        0.1,
        "tokens_in_flight + prompt + tokens <= T",
    ),
    (
        "cooldown.yaml",
        "COOLDOWN",
        [
            _arrive(0.0, "r0"),
            {"t": 0.0, "kind": "reject", "rid": "r0", "reason": "learner"},
            _arrive(0.5, "r1"),
            _admit(0.5, "r1"),
        ],
        "r1",
        0.5,
        "t - last_reject < cool",
    ),
]


def _write(path: Path, records: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.mark.parametrize(("name", "prop", "records", "rid", "t", "guard"), CASES, ids=[c[1] for c in CASES])
def test_check_catches_the_violation_and_passes_the_refusal(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    prop: str,
    records: list[dict[str, object]],
    rid: str,
    t: float,
    guard: str,
) -> None:
    args = ["--contract", str(CONTRACT), "--property", str(EX / name)]
    assert main(["check", _write(tmp_path / "bad.jsonl", records), *args]) == 1
    out = capsys.readouterr().out
    assert f"property {prop}: VIOLATED (1)" in out
    assert f"{prop} {rid} at t={t:g}" in out and guard in out

    refused = [*records[:-1], {"t": t, "kind": "reject", "rid": rid, "reason": f"property: {prop}"}]
    assert main(["check", _write(tmp_path / "ok.jsonl", refused), *args]) == 0
    assert f"property {prop}: holds" in capsys.readouterr().out
