"""Public-trace importers on the real slices and on synthetic BurstGPT rows."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from rvguard.contract import contract_from_mapping
from rvguard.errors import TraceFormatError, TraceOrderError
from rvguard.io.public import (
    EveryKthRule,
    FractionRule,
    PublicArrival,
    detect_public_format,
    iter_public,
    read_public,
    to_arrivals,
)

SLICES = [
    ("azure_code_slice.csv", "azure", 3744, 1215.99748),
    ("azure_conv_slice.csv", "azure", 8000, 1517.057844),
    ("mooncake_conv_slice.jsonl", "mooncake", 5502, 1734.0),
]
BURST_HEADER = (
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
)
AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
MC = '{"timestamp": 0, "input_length": 1, "output_length": 1}\n'
BURST_ROWS = (
    "5,s1,1.2,ChatGPT,472,18,490,Conversation log\n"
    "5.5,s2,0.8,GPT-4,1024,0,1024,API log\n"
    "7.25,s1,2.0,ChatGPT,30,300,330,Conversation log\n"
)


@pytest.mark.parametrize(("name", "fmt", "rows", "span"), SLICES)
def test_real_slices(shared_traces: Path, name: str, fmt: str, rows: int, span: float) -> None:
    path = shared_traces / name
    assert detect_public_format(path) == fmt
    arr = read_public(path)
    assert len(arr) == rows
    assert arr[0].t == 0.0
    assert all(a.t <= b.t for a, b in itertools.pairwise(arr))
    assert arr[-1].t == pytest.approx(span, abs=1e-9)
    assert all(a.prompt_tokens > 0 and a.output_tokens > 0 for a in arr)


def test_azure_first_rows_exact(shared_traces: Path) -> None:
    arr = read_public(shared_traces / "azure_code_slice.csv")
    # 18:17:03.9799600 -> 18:17:04.0319600: exactly 0.052 s, 7th digit kept
    assert arr[:2] == [PublicArrival(0.0, 4808, 10), PublicArrival(0.052, 3180, 8)]


def test_azure_seventh_digit_is_kept(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 23:59:59.9999999,1,2\n"
        "2023-11-17 00:00:00.0000001,3,4\n"
    )
    assert [a.t for a in read_public(p)] == [0.0, 2e-7]


def test_burstgpt_synthetic(tmp_path: Path) -> None:
    p = tmp_path / "burst.csv"
    p.write_text(BURST_HEADER + BURST_ROWS)
    assert detect_public_format(p) == "burstgpt"
    assert read_public(p) == [
        PublicArrival(0.0, 472, 18),
        PublicArrival(0.5, 1024, 0),
        PublicArrival(2.25, 30, 300),
    ]


def test_mooncake_synthetic_extra_keys(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text(
        '{"timestamp": 3000, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n'
        '{"timestamp": 6001, "input_length": 11, "output_length": 6, "hash_ids": [1, 2]}\n'
    )
    assert read_public(p) == [PublicArrival(0.0, 10, 5), PublicArrival(3.001, 11, 6)]


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "words"),
    [
        ("b.csv", BURST_HEADER + "5,s,1,M,abc,1,1,x\n", 2, "Request tokens", "whole number in [0, 2"),
        (
            "b.csv",
            BURST_HEADER + "5,s,1,M," + "9" * 5000 + ",1,1,x\n",
            2,
            "Request tokens",
            "whole number",
        ),
        ("b.csv", BURST_HEADER + "1" + "0" * 400 + ",s,1,M,1,1,2,x\n", 2, "Timestamp", "seconds in [0"),
        (
            "m.jsonl",
            '{"timestamp": 1' + "0" * 400 + ', "input_length": 1, "output_length": 1}\n',
            1,
            "timestamp",
            "ms",
        ),
        (
            "m.jsonl",
            '{"timestamp": 1, "timestamp": 2, "input_length": 1, "output_length": 1}\n',
            1,
            "",
            "duplicate",
        ),
        ("b.csv", BURST_HEADER + BURST_ROWS + "nan,s,1,M,1,1,2,x\n", 5, "Timestamp", "seconds"),
        ("b.csv", BURST_HEADER + "5,s,1,M,1\n", 2, "Response tokens", "fewer cells"),
        ("b.csv", BURST_HEADER + "5,s,1,M,1,1,2,x,extra\n", 2, "", "more cells"),
        (
            "a.csv",
            AZ + "2023-11-16 18:17,1,2\n",
            2,
            "TIMESTAMP",
            "look like",
        ),
        (
            "a.csv",
            AZ + "2023-02-30 18:17:00.1,1,2\n",
            2,
            "TIMESTAMP",
            "date",
        ),
        (
            "a.csv",
            AZ + "2023-11-16 18:17:00.1,-1,2\n",
            2,
            "ContextTokens",
            "whole",
        ),
        (
            "m.jsonl",
            MC + '{"timestamp": 1,\n',
            2,
            "",
            "JSON",
        ),
        (
            "m.jsonl",
            MC + '{"timestamp": 1}\n',
            2,
            "input_length",
            "missing",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 1, "output_length": 1.5}\n',
            1,
            "output_length",
            "whole",
        ),
        (
            "m.jsonl",
            '{"timestamp": -5, "input_length": 1, "output_length": 1}\n',
            1,
            "timestamp",
            "number of ms in [0",
        ),
    ],
)
def test_bad_rows_are_located(
    tmp_path: Path, name: str, text: str, line: int, field: str, words: str
) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(TraceFormatError) as info:
        read_public(p)
    assert (info.value.path, info.value.line, info.value.field) == (str(p), line, field)
    assert words in info.value.reason


def test_decreasing_timestamp_is_an_order_error(tmp_path: Path) -> None:
    p = tmp_path / "b.csv"
    p.write_text(BURST_HEADER + "5,s,1,M,1,1,2,x\n4,s,1,M,1,1,2,x\n")
    with pytest.raises(TraceOrderError) as info:
        read_public(p)
    assert (info.value.line, info.value.field) == (3, "Timestamp")


def test_unknown_format_names_columns(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("when,size\n1,2\n")
    with pytest.raises(TraceFormatError) as info:
        detect_public_format(p)
    assert "found: size, when" in str(info.value)
    assert info.value.line == 1


def test_streaming_is_lazy(shared_traces: Path) -> None:
    it = iter_public(shared_traces / "azure_conv_slice.csv")
    assert next(it).t == 0.0


@pytest.mark.parametrize("name", [s[0] for s in SLICES])
def test_rate_scaling_hits_the_target(shared_traces: Path, name: str) -> None:
    arr = read_public(shared_traces / name)
    out = to_arrivals(arr, rate=9.6)
    assert (len(out) - 1) / (out[-1].t - out[0].t) == pytest.approx(9.6, rel=1e-12)
    assert all(a.t <= b.t for a, b in itertools.pairwise(out))


def test_fraction_rule_is_seeded_and_near_its_fraction(shared_traces: Path) -> None:
    arr = read_public(shared_traces / "azure_conv_slice.csv")
    a = to_arrivals(arr, tenant_rule=FractionRule(0.25, seed=7))
    b = to_arrivals(arr, tenant_rule=FractionRule(0.25, seed=7))
    c = to_arrivals(arr, tenant_rule=FractionRule(0.25, seed=8))
    assert [x.tenant for x in a] == [x.tenant for x in b]
    assert [x.tenant for x in a] != [x.tenant for x in c]
    share = sum(x.tenant == "assured" for x in a) / len(a)
    assert abs(share - 0.25) < 4 * math.sqrt(0.25 * 0.75 / len(a))


def test_every_kth_rule_cap_and_contract_deadlines() -> None:
    contract = contract_from_mapping(
        {
            "window": 1.0,
            "slots": 4,
            "output_cap": 48,
            "service": {"s_max": 0.66, "s_max_opp": 0.66, "lower": 0.236},
            "tenants": {
                "gold": {"floor": 6, "deadline": 1.82, "tier": 0},
                "rest": {"floor": 0, "deadline": 5.0, "tier": 1},
            },
        }
    )
    rows = [PublicArrival(float(i), 100 + i, 10 * i) for i in range(7)]
    out = to_arrivals(rows, tenant_rule=EveryKthRule(3, assured="gold", other="rest"), contract=contract)
    assert [a.tenant for a in out] == ["rest", "rest", "gold", "rest", "rest", "gold", "rest"]
    assert [a.max_tokens for a in out] == [0, 10, 20, 30, 40, 48, 48]
    assert [a.deadline for a in out] == [a.t + (1.82 if a.tenant == "gold" else 5.0) for a in out]
    assert [a.rid for a in out] == [f"r{i}" for i in range(7)]
    assert [a.prompt_tokens for a in out] == [100 + i for i in range(7)]
    capped = to_arrivals(rows, output_cap=15)
    assert [a.max_tokens for a in capped] == [0, 10, 15, 15, 15, 15, 15]
    assert all(a.deadline is None for a in capped)
    with pytest.raises(ValueError, match="does not declare"):
        to_arrivals(rows, contract=contract)


@pytest.mark.parametrize("rows", [[], [PublicArrival(0.0, 1, 1)], [PublicArrival(0.0, 1, 1)] * 3])
def test_rate_needs_a_span(rows: list[PublicArrival]) -> None:
    with pytest.raises(ValueError, match="two arrivals"):
        to_arrivals(rows, rate=1.0)


def test_rules_validate() -> None:
    with pytest.raises(ValueError, match="fraction"):
        FractionRule(1.5)
    with pytest.raises(ValueError, match="k must"):
        EveryKthRule(0)
