"""Contract fields as z3 terms: one symbol per field, one tracked fact per value.

Theory of operation. An `Encoding` owns no solver. It hands out one z3
symbol per contract field path (``tenants.assured.deadline`` becomes the
symbol ``tenants.assured.deadline_0``: step 0 is the contract's own value) and
records the fact ``symbol == value`` under the field path, so a solver that
asserts the facts with ``assert_and_track`` gets unsat cores made of field
paths. Derived quantities that the obligations need (the number of entitled
requests per window, the ⌈N/C⌉ waves, the ceilings) are introduced as
auxiliary symbols tied to the fields by *definitions*, tracked as
``def:<name>`` and filtered out of cores. Synthesis leaves chosen fields
free (no fact), so an optimiser can move them.

The dispatch structure (which tenants are floored, who outranks whom) is
read from the contract in Python; only magnitudes are symbolic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..contract import Contract, CreditMode
from ..exact import MIN_TOKENS
from ._z3 import real

__all__ = ["DEFAULT_OPTIONS", "Encoding", "VerifyOptions", "ceiling_field", "field_values", "opp_field"]


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    """Assumptions the contract file does not state.

    Attributes:
        min_prompt_tokens: fewest prompt tokens a request carries (token credits).
        min_output_tokens: fewest output tokens a request asks for, before the cap.
        backlog_assumption: take the reference study's assumption that at
            most one window's floor of each tenant is in the system when a
            request arrives (Q_A ≤ B). It is refuted by proofs/backlog_lemma.py;
            the default (False) checks the closing bound, which assumes nothing
            about the backlog (proofs/README.md §2).
    """

    min_prompt_tokens: int = MIN_TOKENS
    min_output_tokens: int = MIN_TOKENS
    backlog_assumption: bool = False


DEFAULT_OPTIONS = VerifyOptions()


def opp_field(contract: Contract) -> str:
    """Field path of the opportunistic ceiling (``s_max`` when ``s_max_opp`` is absent)."""
    return "service.s_max" if contract.service.s_max_opp is None else "service.s_max_opp"


def ceiling_field(contract: Contract, tenant: str) -> str:
    """Field path of the ceiling that bounds this tenant's requests (`Contract.ceiling`)."""
    t = contract.tenants[tenant]
    if not t.floored:
        return opp_field(contract)
    return "service.s_max" if t.s_max is None else f"tenants.{tenant}.s_max"


def field_values(contract: Contract) -> dict[str, float | int]:
    """Every numeric contract field the obligations read, by dotted path."""
    svc = contract.service
    values: dict[str, float | int] = {
        "window": contract.window,
        "slots": contract.slots,
        "reserve": contract.reserve,
        "output_cap": contract.output_cap,
        "service.s_max": svc.s_max,
        "service.lower.base": svc.lower.base,
        "service.lower.per_token": svc.lower.per_token,
        "token_weights.prompt": contract.token_weights.prompt,
        "token_weights.output": contract.token_weights.output,
    }
    if svc.s_max_opp is not None:
        values["service.s_max_opp"] = svc.s_max_opp
    if svc.upper is not None:
        values["service.upper.base"] = svc.upper.base
        values["service.upper.per_token"] = svc.upper.per_token
    for name, t in contract.tenants.items():
        count = contract.credit is CreditMode.COUNT
        values[f"tenants.{name}.floor"] = int(t.floor) if count else t.floor
        values[f"tenants.{name}.deadline"] = t.deadline
        if t.s_max is not None:
            values[f"tenants.{name}.s_max"] = t.s_max
    return values


_INT_FIELDS = frozenset({"slots", "reserve", "output_cap"})


class Encoding:
    """Symbols, value facts and definitions for one contract (no solver inside).

    Args:
        z3: the z3 module (from `load_z3`).
        contract: the contract whose fields become symbols.
        options: assumptions the contract does not state.
        free: field paths left without a value fact (synthesis moves them).
    """

    def __init__(
        self,
        z3: ModuleType,
        contract: Contract,
        *,
        options: VerifyOptions = DEFAULT_OPTIONS,
        free: Iterable[str] = (),
    ) -> None:
        self.z3 = z3
        self.contract = contract
        self.options = options
        self.free = frozenset(free)
        self.facts: dict[str, Any] = {}
        self.definitions: dict[str, Any] = {}
        self._values = field_values(contract)
        self._terms: dict[str, Any] = {}

    # -- fields ------------------------------------------------------------
    def _is_int(self, field: str) -> bool:
        if field in _INT_FIELDS:
            return True
        return field.endswith(".floor") and self.contract.credit is CreditMode.COUNT

    def term(self, field: str) -> Any:
        """The symbol of ``field``; records its value fact unless the field is free."""
        if field in self._terms:
            return self._terms[field]
        z3 = self.z3
        sym = z3.Int(f"{field}_0") if self._is_int(field) else z3.Real(f"{field}_0")
        self._terms[field] = sym
        if field not in self.free:
            value = self._values[field]
            self.facts[field] = sym == (z3.IntVal(int(value)) if self._is_int(field) else real(z3, value))
        return sym

    def value(self, field: str) -> float | int:
        """The contract's own value of ``field``."""
        return self._values[field]

    def define(self, name: str, expr: Any) -> None:
        """Tie an auxiliary symbol to the fields (tracked as ``def:<name>``)."""
        self.definitions[f"def:{name}"] = expr

    # -- derived quantities -----------------------------------------------
    def ceiling(self, tenant: str) -> Any:
        """The ceiling term of a tenant's requests."""
        return self.term(ceiling_field(self.contract, tenant))

    def max_of(self, terms: list[Any]) -> Any:
        """The maximum of non-empty ``terms`` as an If-chain."""
        best = terms[0]
        for t in terms[1:]:
            best = self.z3.If(t > best, t, best)
        return best

    def min_weight(self) -> Any:
        """w_min: the least credit one request can spend (1 with count credits)."""
        if self.contract.credit is CreditMode.COUNT:
            return self.z3.IntVal(1)
        o = self.options
        out = min(o.min_output_tokens, self.contract.output_cap)
        prompt = self.term("token_weights.prompt")
        output = self.term("token_weights.output")
        return prompt * o.min_prompt_tokens + output * out

    def requests(self, tenant: str) -> Any:
        """n: most entitled requests of ``tenant`` per window (B, or ⌊B / w_min⌋)."""
        floor = self.term(f"tenants.{tenant}.floor")
        if self.contract.credit is CreditMode.COUNT:
            return floor
        n = self.z3.Int(f"requests.{tenant}_0")
        w = self.min_weight()
        self.define(f"requests.{tenant}", self.z3.And(n * w <= floor, floor < (n + 1) * w, n >= 0))
        return n

    def windows(self, name: str, length: Any) -> Any:
        """Windows a half-open interval of ``length`` meets: ⌈length/W⌉ + 1 if length > 0, else 0.

        An Int symbol tied by a definition; when a field is free (synthesis) and
        ``length`` does not depend on it, the count is folded to its value so that
        the optimiser's products (N_j · windows) stay linear.
        """
        z3 = self.z3
        w = self.term("window")
        if self.free:
            fixed = [(f.arg(0), f.arg(1)) for f in self.facts.values()]
            folded = z3.simplify(z3.substitute(length, *fixed))
            window = z3.simplify(z3.substitute(w, *fixed))
            if z3.is_rational_value(folded) and z3.is_rational_value(window):
                size, width = folded.as_fraction(), window.as_fraction()
                return z3.IntVal(-((-size) // width) + 1 if size > 0 else 0)
        k = z3.Int(f"windows.{name}_0")
        span = z3.And(k >= 1, (k - 2) * w < length, length <= (k - 1) * w)
        self.define(f"windows.{name}", z3.If(length > 0, span, k == 0))
        return k

    def waves(self, name: str, n: Any) -> Any:
        """An Int symbol defined as ⌈n / C⌉ (C = the slots field)."""
        c = self.term("slots")
        w = self.z3.Int(f"waves.{name}_0")
        self.define(f"waves.{name}", self.z3.And(c * (w - 1) < n, n <= c * w))
        return w
