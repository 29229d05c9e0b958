"""``rvguard screen SPEC --rate … --service-sample FILE``: the P95 screen at the command line.

Declared in `rvguard.screen.commands`; ``run`` is True when the screen accepts
(exit 0) and False when it rejects (exit 1); bad input raises (exit 2). Every
output, text or JSON, carries the "screen, not a guarantee" label.

Workload options: ``--rate TENANT=R`` per tenant (repeatable), or one bare
``--rate R`` split the simulator's way (assured at min(R, B/W), the rest to
the opportunistic tenant); ``--policy priority|fifo``; ``--no-gating`` to
skip the floor admission; ``--deadline S`` to screen another deadline.
The service sample is a file of numbers (seconds; whitespace, comma or
newline separated, ``#`` comments) or a trace (.jsonl/.csv/.parquet), whose
completed requests give ``complete − dispatch``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from pathlib import Path

from ..contract import Contract, load_contract
from ..errors import SpecError, TraceError
from ..events import Complete, Dispatch
from .predict import ScreenResult, Workload, screen
from .queueing import ServiceDistribution

__all__ = ["add_arguments", "parse_service_percentiles", "read_service_sample", "render_screen", "run"]

_TRACE_SUFFIXES = (".jsonl", ".ndjson", ".parquet")
#: the largest numbers file --service-sample reads, bytes (a few million samples)
_SAMPLE_BYTES = 64 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``rvguard screen``."""
    p.add_argument("spec", help="contract file (.yaml or .json)")
    p.add_argument(
        "--rate",
        action="append",
        required=True,
        metavar="TENANT=R",
        help="offered req/s per tenant (repeat), or one total R split assured B/W + rest",
    )
    service = p.add_mutually_exclusive_group(required=True)
    service.add_argument("--service-sample", metavar="FILE", help="service times (s) or a trace")
    service.add_argument(
        "--service-percentiles",
        metavar="p50=S,p99=S",
        help="service p50 and p99 (s) when no sample is at hand: a lognormal through both is assumed",
    )
    p.add_argument("--percentile", default="p99", help="service dial: p50, mean, p99 or pNN (default p99)")
    p.add_argument("--policy", choices=("priority", "fifo"), default="priority")
    p.add_argument("--no-gating", action="store_true", help="do not apply the floor admission")
    p.add_argument("--deadline", type=float, help="screen this deadline (s) for every floored tenant")
    p.add_argument("--json", action="store_true")


def parse_rates(items: list[str], contract: Contract) -> dict[str, float]:
    """``TENANT=R`` pairs, or a single bare total rate split the simulator's way."""
    if len(items) == 1 and "=" not in items[0]:
        total = _number(items[0], "rate")
        assured = next(iter(contract.floored_tenants), None)
        floor_rate = 0.0 if assured is None else contract.tenants[assured].floor / contract.window
        a = min(total, floor_rate)
        split = {} if assured is None else {assured: a}
        rest = contract.lowest_tier_tenant
        split[rest] = split.get(rest, 0.0) + total - a
        return split
    rates: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SpecError(f"--rate wants TENANT=R, got {item!r}", field="rate", value=item)
        rates[name.strip()] = rates.get(name.strip(), 0.0) + _number(value, "rate")
    return rates


def parse_service_percentiles(text: str) -> ServiceDistribution:
    """``p50=S,p99=S`` → the lognormal through both (`ServiceDistribution.lognormal_through`).

    Raises:
        SpecError: a missing or extra key, a bad number, or p50 > p99 (field ``service-percentiles``).
    """
    given: dict[str, float] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or key.strip() not in ("p50", "p99"):
            raise SpecError(
                f"--service-percentiles wants p50=S,p99=S, got {item.strip()!r}",
                field="service-percentiles",
                value=text,
            )
        given[key.strip()] = _number(value, "service-percentiles")
    if set(given) != {"p50", "p99"}:
        raise SpecError(
            f"--service-percentiles needs both p50 and p99, got {text!r}",
            field="service-percentiles",
            value=text,
        )
    try:
        return ServiceDistribution.lognormal_through(given["p50"], given["p99"])
    except ValueError as err:
        raise SpecError(f"--service-percentiles: {err}", field="service-percentiles", value=text) from None


def _number(text: str, name: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise SpecError(f"--{name}: not a number: {text!r}", field=name, value=text) from None
    if not math.isfinite(x) or x < 0:
        raise SpecError(f"--{name} must be finite and ≥ 0, got {text!r}", field=name, value=text)
    return x


def read_service_sample(path: str) -> ServiceDistribution:
    """Service times from a numbers file or a trace (complete − dispatch).

    Raises:
        SpecError: unreadable, empty, or non-positive samples (field ``service-sample``).
        TraceError: a trace with a bad record.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"--service-sample: no such file {path!r}", field="service-sample", value=path)
    text = "" if p.suffix in (*_TRACE_SUFFIXES, ".parquet", ".pq") else _text(p)
    values = None if p.suffix in _TRACE_SUFFIXES else _numbers(text)
    if values is None and p.suffix not in (*_TRACE_SUFFIXES, ".csv", ".parquet", ".pq", ".json"):
        where, token = _first_bad_token(text)
        raise SpecError(
            f"--service-sample {path}:{where}: not a number: {token!r} (a numbers file, or a trace: "
            f"{', '.join(_TRACE_SUFFIXES)}, .csv)",
            field="service-sample",
            value=path,
        )
    if values is None:
        values = _trace_services(path)
    try:
        return ServiceDistribution.of(values)
    except ValueError as err:
        raise SpecError(f"--service-sample {path}: {err}", field="service-sample", value=path) from None


def _text(p: Path) -> str:
    """A numbers file as text, at most `_SAMPLE_BYTES`; a binary or huge file is bad input."""
    from ..untrusted import StructureError, read_text

    try:
        return read_text(p, limit=_SAMPLE_BYTES)
    except StructureError as exc:
        raise SpecError(f"--service-sample {p}: {exc}", field="service-sample") from None


def _numbers(text: str) -> list[float] | None:
    """The numbers in ``text``, or None when it is not a plain list of numbers (e.g. a trace CSV)."""
    out: list[float] = []
    for line in text.splitlines():
        body = line.split("#", 1)[0]
        for token in re.split(r"[\s,;]+", body.strip()):
            if not token:
                continue
            try:
                out.append(float(token))
            except ValueError:
                return None
    return out


def _first_bad_token(text: str) -> tuple[int, str]:
    """(line number, token) of the first token of ``text`` that is not a number."""
    for number, line in enumerate(text.splitlines(), 1):
        for token in re.split(r"[\s,;]+", line.split("#", 1)[0].strip()):
            if token:
                try:
                    float(token)
                except ValueError:
                    return number, token
    return 0, ""


def _trace_services(path: str) -> list[float]:
    from ..io import iter_records

    started: dict[str, float] = {}
    out: list[float] = []
    for _, item in iter_records(path):
        if isinstance(item, TraceError):
            raise item
        if isinstance(item, Dispatch):
            started[item.rid] = item.t
        elif isinstance(item, Complete) and item.rid in started:
            out.append(item.t - started.pop(item.rid))
    return out


def _fmt(x: float) -> str:
    return "∞ (unstable)" if math.isinf(x) else f"{x:.3f}"


def render_screen(result: ScreenResult) -> str:
    """The readable report; the verdict line always carries the label."""
    lines = [
        f"rvguard screen — {result.caveat}",
        f"policy {result.policy}, C = {result.slots}, service dial {result.percentile}: "
        f"m = {result.service_assumed:.3f} s (sample mean {result.service_mean:.3f} s, "
        f"c_s² = {result.service_scv:.3f})",
        f"utilisation assumed: offered ρ = {result.rho_offered:.3f}, admitted ρ = {result.rho_admitted:.3f}, "
        f"P(wait) = {result.p_wait:.3f}",
    ]
    for t in result.tenants:
        lines.append(
            f"  {t.tenant}: offered {t.offered_rate:g}/s, admitted {t.admitted_rate:.3f}/s, "
            f"mean wait {_fmt(t.mean_wait)} s, predicted P95 {_fmt(t.p95)} s vs D = {t.deadline:g} s "
            f"→ {'accept' if t.accept else 'reject'}"
        )
    for f in result.flags:
        lines.append(f"  flag {f.name}: {f.detail}")
    for note in result.notes:
        lines.append(f"  note: {note}")
    lines.append(f"verdict: {result.verdict}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> bool:
    """Run ``rvguard screen``: True when it accepts, False when it rejects (both labelled)."""
    contract = load_contract(args.spec)
    rates = parse_rates(args.rate, contract)
    if args.service_sample is not None:
        service = read_service_sample(args.service_sample)
    else:
        service = parse_service_percentiles(args.service_percentiles)
    workload = Workload(rates, service, policy=args.policy, gating=not args.no_gating)
    deadlines = None
    if args.deadline is not None:
        d = _number(str(args.deadline), "deadline")
        deadlines = dict.fromkeys(contract.floored_tenants, d)
    result = screen(contract, workload, percentile=args.percentile, deadlines=deadlines)
    if args.service_sample is None:
        note = f"service: lognormal through {args.service_percentiles} (assumed shape, no sample)"
        result = dataclasses.replace(result, notes=(*result.notes, note))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        print(render_screen(result))
    return result.accept
