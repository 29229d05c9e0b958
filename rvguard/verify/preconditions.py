"""Verify a contract: every obligation of DESIGN §5, each with an actionable sentence.

`verify_contract` runs each clause of `rvguard.verify.obligations` on its
own encoding and solver, and turns z3's answer into an `ObligationResult`:
the verdict is z3's; the sentence quotes the model's values and, for a
failure, the nearest safe parameters found by `rvguard.verify.synthesis`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from ..contract import Contract, CreditMode, load_contract
from ._z3 import load_z3
from .assumptions import assumptions_of
from .encoding import DEFAULT_OPTIONS, Encoding, VerifyOptions, ceiling_field, opp_field
from .obligations import (
    OUTPUT_TOKENS,
    Decision,
    ObligationResult,
    blocking_fields,
    cohort,
    decide,
    encode_credit_bound,
    encode_deadline,
    encode_dr_soundness,
    encode_service_envelope,
    encode_stability,
    unbounded_ahead,
    unbounded_symbols,
)
from .reserve import floor_blocking_fields, reserve_bound
from .synthesis import synthesize_deadline, synthesize_floor, synthesize_reserve, synthesize_slots

__all__ = ["all_hold", "verify_contract", "verify_file"]

Numbers = dict[str, float | int]


def secs(x: float) -> str:
    """Seconds for a sentence: two decimals, three when two would round."""
    return f"{x:.2f}" if abs(round(x, 2) - x) < 1e-9 else f"{math.ceil(x * 1000 - 1e-9) / 1000:.3f}"


def _short(field: str) -> str:
    return {"service.s_max": "s_max", "service.s_max_opp": "s_max_opp"}.get(field, field)


# -- stability ---------------------------------------------------------------
def _stability(contract: Contract, options: VerifyOptions) -> ObligationResult:
    enc = Encoding(load_z3(), contract, options=options)
    d = decide(enc, encode_stability(enc))
    v = d.values
    demand, supply = float(v.get("demand", 0.0)), contract.slots * contract.window
    lhs = f"Σ B·s_max = {secs(demand)} s"
    rhs = f"C·W = {contract.slots}×{secs(contract.window)} s"
    if d.holds:
        return ObligationResult("stability", True, None, [], f"A4 holds: {lhs} ≤ {rhs}")
    slots = synthesize_slots(contract, options=options).value
    last = max((t.tier, n) for n, t in contract.floored_tenants.items())[1]
    floor = synthesize_floor(contract, last, options=options).value
    fixes = [f"raise slots to {slots}"] if slots is not None else []
    if floor is not None:
        fixes.append(f"lower the floor of {last} to {floor}")
    fix = " or ".join(fixes) or "lower the floors"
    msg = f"A4 fails: {lhs} > {rhs} = {secs(supply)} s: {fix}"
    return ObligationResult("stability", False, d.counterexample, d.fields, msg)


# -- deadlines ---------------------------------------------------------------
def _bound(contract: Contract, tenant: str, v: Numbers) -> float:
    """The clause's bound in the model ``v``: b + ⌈N/C⌉·ŝ, or with a reserve T (`reserve.reserve_bound`)."""
    if f"floor_block.{tenant}" not in v:
        return float(v[f"bound.{tenant}"])

    def exact(key: str) -> Fraction:
        return Fraction(repr(float(v[f"{key}.{tenant}"])))  # the decimal z3 was given (`_z3.real`)

    n, c, r = int(v[f"requests.ahead.{tenant}"]), contract.slots, contract.reserve
    return float(reserve_bound(n, c, r, exact("wave"), exact("block"), exact("floor_block")))


def _names(fields: list[str]) -> str:
    return _short(fields[0]) if len(fields) == 1 else f"max({', '.join(sorted(map(_short, fields)))})"


def _slots(k: int) -> str:
    return f"{k} slot" if k == 1 else f"{k} slots"


def _reserve_terms(contract: Contract, tenant: str, v: Numbers) -> str:
    """The reserved bound in words: who starts the N ahead, from when, in waves of what."""
    c, r, n = contract.slots, contract.reserve, int(v[f"requests.ahead.{tenant}"])
    lower = floor_blocking_fields(contract, tenant)
    since = f"after {_names(lower)}" if lower else "at once"
    waves = _names(sorted({ceiling_field(contract, j) for j in cohort(contract, tenant)}))
    return (
        f"the bound with reserve {r} of {c} slots ({n} ahead start on {_slots(r)} {since} and on "
        f"{_slots(c - r)} after {_names(blocking_fields(contract, tenant))}, each within {waves})"
    )


def _ahead_words(contract: Contract, tenant: str, v: Numbers, options: VerifyOptions) -> str:
    """Who the N ahead are: each tenant's requests per window times the windows they can come from."""
    mine, parts = contract.tenants[tenant].tier, []
    for j in cohort(contract, tenant):
        per = v.get(f"requests.{j}", contract.tenants[j].floor)
        k = v.get(f"windows.{tenant}.{j}")
        if options.backlog_assumption:
            k = 1 + int(k) if contract.tenants[j].tier < mine and k is not None else 1
        parts.append(f"{j} {float(per):g}×{int(k) if k is not None else '?'}")
    how = (
        "per window × windows" if not options.backlog_assumption else "per window × windows, backlog assumed"
    )
    return f"{int(v[f'requests.ahead.{tenant}'])} ahead: {', '.join(parts)} ({how})"


def _deadline_terms(contract: Contract, tenant: str, v: Numbers, options: VerifyOptions) -> str:
    ahead = f" [{_ahead_words(contract, tenant, v, options)}]"
    if contract.reserve > 0:
        return _reserve_terms(contract, tenant, v) + ahead
    bname = _names(blocking_fields(contract, tenant))
    wname = _names(sorted({ceiling_field(contract, j) for j in cohort(contract, tenant)}))
    n = int(v[f"requests.ahead.{tenant}"])
    return f"{bname} + ⌈{n}/{contract.slots}⌉·{wname}{ahead}"


def _deadline_fix(contract: Contract, tenant: str, bound: float, options: VerifyOptions) -> str:
    least = synthesize_deadline(contract, tenant, options=options).value
    fix = f"the smallest deadline that holds is {secs(float(least))} s" if least is not None else ""
    fix = fix or f"no deadline holds (the bound at {secs(bound)} s grows with it)"
    floor = synthesize_floor(contract, tenant, options=options).value
    if floor is None:
        return f"{fix} (no floor ≥ 1 meets the current one)"
    tenants = dict(contract.tenants)
    tenants[tenant] = tenants[tenant].model_copy(update={"floor": floor})
    lowered = contract.model_copy(update={"tenants": tenants})
    need = synthesize_deadline(lowered, tenant, options=options).value
    inside = (
        f" (with floor {floor} the smallest deadline is {secs(float(need))} s)" if need is not None else ""
    )
    return f"{fix} or lower the floor to {floor}{inside}{_reserve_fix(contract, tenant, options)}"


def _reserve_fix(contract: Contract, tenant: str, options: VerifyOptions) -> str:
    """A larger reserve that meets the deadline, as a fix ('' when none does)."""
    r = synthesize_reserve(contract, tenant, options=options).value
    if r is None or r <= contract.reserve:
        return ""
    return f", or reserve {r} of the {contract.slots} slots for floor work (reserve: {r})"


def _decide_deadline(contract: Contract, tenant: str, options: VerifyOptions) -> Decision:
    enc = Encoding(load_z3(), contract, options=options)
    pinned = (OUTPUT_TOKENS, *unbounded_symbols(contract, tenant))
    return decide(enc, encode_deadline(enc, tenant), pinned=pinned)


def _ranked_first(contract: Contract, tenant: str) -> Contract:
    """The contract with each unfloored tenant ranked ahead of ``tenant`` moved to its tier."""
    tier = contract.tenants[tenant].tier
    tenants = dict(contract.tenants)
    for j in unbounded_ahead(contract, tenant):
        tenants[j] = tenants[j].model_copy(update={"tier": tier})
    return contract.model_copy(update={"tenants": tenants})


def _unbounded(
    name: str, contract: Contract, tenant: str, d: Decision, options: VerifyOptions
) -> ObligationResult:
    """Unfloored work ranked ahead of a floor: no deadline holds. Why, the counterexample, the fixes."""
    others = unbounded_ahead(contract, tenant)
    tier, v = contract.tenants[tenant].tier, d.values
    who = " and ".join(f"{j} (tier {contract.tenants[j].tier})" for j in others)
    had = " and ".join(f"{int(v[f'requests.unbounded.{j}'])} of {j}'s" for j in others)
    bound, dl = _bound(contract, tenant, v), contract.tenants[tenant].deadline
    after = _deadline(_ranked_first(contract, tenant), tenant, options)
    names = " and ".join(others)
    msg = (
        f"unfloored work of {who} ranks ahead of {tenant}'s floor (tier {tier}) and the learner may admit "
        f"any amount of it, so no deadline holds: with {had} requests ahead "
        f"({int(v[f'requests.ahead.{tenant}'])} in all) the bound is {secs(bound)} s > {secs(dl)} s; "
        f"rank the floor first (give {names} tier {tier} or more: then {after.message}) "
        f"or bound {names} with a floor (its excess is then rejected or demoted behind the floors)"
    )
    structure = {f"tenants.{tenant}.tier", *(f"tenants.{j}.{f}" for j in others for f in ("tier", "floor"))}
    return ObligationResult(name, False, d.counterexample, sorted(set(d.fields) | structure), msg)


def _deadline(contract: Contract, tenant: str, options: VerifyOptions) -> ObligationResult:
    d = _decide_deadline(contract, tenant, options)
    name = f"deadline[{tenant}]"
    if not d.values:
        return _undecidable(name, d, contract)
    if unbounded_ahead(contract, tenant):
        return _unbounded(name, contract, tenant, d, options)
    dl, bound = contract.tenants[tenant].deadline, _bound(contract, tenant, d.values)
    terms = _deadline_terms(contract, tenant, d.values, options)
    if d.holds:
        return ObligationResult(name, True, None, [], f"deadline {secs(dl)} s ≥ {terms} = {secs(bound)} s")
    fix = _deadline_fix(contract, tenant, bound, options)
    msg = f"deadline {secs(dl)} s < {terms} = {secs(bound)} s: {fix}"
    return ObligationResult(name, False, d.counterexample, d.fields, msg)


def _undecidable(name: str, d: Decision, contract: Contract) -> ObligationResult:
    msg = (
        "token weights let a request spend no credit, so no number of requests per window "
        "follows from the floor: raise token_weights.prompt or token_weights.output"
    )
    fields = d.fields or ["token_weights.prompt", "token_weights.output"]
    return ObligationResult(name, False, None, fields, msg)


# -- envelope and DR ---------------------------------------------------------
def _ceilings(contract: Contract) -> dict[str, float]:
    values = {opp_field(contract): contract.service.opp_ceiling}
    for n, t in contract.tenants.items():
        ceiling = contract.ceiling(n) if t.floored else contract.service.opp_ceiling
        values[ceiling_field(contract, n)] = ceiling
    return values


def _envelope(contract: Contract, options: VerifyOptions) -> ObligationResult:
    enc = Encoding(load_z3(), contract, options=options)
    d = decide(enc, encode_service_envelope(enc))
    upper, cap = contract.service.upper, contract.output_cap
    if upper is None:
        msg = "no upper bound U declared: the ceilings are the envelope (an assumption the monitors watch)"
        return ObligationResult("service_envelope", True, None, [], msg)
    top = upper.at(cap)
    if d.holds:
        return ObligationResult(
            "service_envelope", True, None, [], f"U(output_cap = {cap}) = {secs(top)} s ≤ every ceiling"
        )
    ceilings = _ceilings(contract)
    in_core = [f for f in d.fields if f in ceilings]
    field = in_core[0] if in_core else min(ceilings, key=lambda f: ceilings[f])
    ceil = ceilings[field]
    fix = f"raise {field} to {secs(top)} s"
    if upper.per_token > 0 and upper.base <= ceil:
        fix += f" or lower output_cap to {math.floor((ceil - upper.base) / upper.per_token + 1e-9)}"
    msg = f"service.upper at output_cap = {cap} tokens is {secs(top)} s > {field} = {secs(ceil)} s: {fix}"
    return ObligationResult("service_envelope", False, d.counterexample, d.fields, msg)


def _dr(contract: Contract, options: VerifyOptions) -> ObligationResult:
    enc = Encoding(load_z3(), contract, options=options)
    d = decide(enc, encode_dr_soundness(enc))
    lower, cap = contract.service.lower, contract.output_cap
    if d.holds:
        msg = (
            f"L(ℓ) ≤ the envelope for ℓ ≤ {cap} (L(cap) = {secs(lower.at(cap))} s); "
            "L ≤ true service stays an assumption the monitors check"
        )
        return ObligationResult("dr_soundness", True, None, [], msg)
    ell = int(d.values.get("output_tokens", cap))
    msg = (
        f"service.lower at ℓ = {ell} tokens is {secs(lower.at(ell))} s, above a possible service "
        f"({', '.join(f for f in d.fields if f.startswith(('service.s_max', 'service.upper', 'tenants')))}): "
        "lower service.lower so that doom-sound drops never shed feasible work"
    )
    return ObligationResult("dr_soundness", False, d.counterexample, d.fields, msg)


def _credit_bound(contract: Contract, options: VerifyOptions) -> ObligationResult:
    enc = Encoding(load_z3(), contract, options=options)
    d = decide(enc, encode_credit_bound(enc))
    if d.holds:
        w = float(d.values.get("token_weights.prompt", 0)) * options.min_prompt_tokens + float(
            d.values.get("token_weights.output", 0)
        ) * min(options.min_output_tokens, contract.output_cap)
        msg = f"w_min = {w:g} > 0: at most ⌊B / {w:g}⌋ requests per window"
        return ObligationResult("credit_bound", True, None, [], msg)
    return _undecidable("credit_bound", d, contract)


# -- driver ------------------------------------------------------------------
def verify_contract(
    contract: Contract, *, options: VerifyOptions = DEFAULT_OPTIONS
) -> list[ObligationResult]:
    """Check every obligation of ``contract``.

    Returns:
        One result per clause: ``credit_bound`` (token credits only),
        ``stability``, ``deadline[<tenant>]`` per floored tenant,
        ``service_envelope`` and ``dr_soundness``.

    Raises:
        MissingExtraError: z3-solver is not installed.
    """
    checks: list[Callable[[], ObligationResult]] = []
    if contract.credit is CreditMode.TOKENS:
        checks.append(lambda: _credit_bound(contract, options))
    checks.append(lambda: _stability(contract, options))
    for name in sorted(contract.floored_tenants, key=lambda n: (contract.tenants[n].tier, n)):
        checks.append(lambda name=name: _deadline(contract, name, options))  # type: ignore[misc]
    checks += [lambda: _envelope(contract, options), lambda: _dr(contract, options)]
    results = [check() for check in checks]
    return [replace(r, assumptions=tuple(assumptions_of(r.name, contract, options))) for r in results]


def verify_file(path: str | Path, *, options: VerifyOptions = DEFAULT_OPTIONS) -> list[ObligationResult]:
    """Load a contract file and verify it.

    Raises:
        SpecError: the file cannot be read or a field is invalid.
        MissingExtraError: z3-solver is not installed.
    """
    return verify_contract(load_contract(path), options=options)


def all_hold(results: list[ObligationResult]) -> bool:
    """True when every obligation holds."""
    return all(r.holds for r in results)
