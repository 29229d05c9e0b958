"""The assured-SLO contract (DESIGN §1) and its window arithmetic.

A contract is a frozen pydantic model, validated whole at construction:
a bad field raises `SpecError` naming the field and the value. Window
arithmetic (`window_index`, `window_start`) and floor entitlement
(`Entitlement`) live here because every other layer (monitors, enforcer,
verifier, simulator) must agree on them exactly: credits are whole units
and window edges are decided on the decimals as written (`rvguard.exact`).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import pydantic
from pydantic import BaseModel, Field, field_validator, model_validator

from .bounds import (
    MAX_FLOOR,
    MAX_SLOTS,
    MAX_SPAN,
    MAX_SPEC_BYTES,
    MAX_TIER,
    MAX_TIME,
    MAX_TOKENS,
    MAX_WEIGHT,
    MIN_WINDOW,
    printable,
    shown,
)
from .entitlement import Entitlement as Entitlement
from .errors import SpecError
from .exact import CreditUnits, credit_units
from .exact import window_index as window_index
from .runbook_spec import EvictionSpec, FleetSpec, HeadroomSpec

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "INT_MAX",
    "Bound",
    "Contract",
    "CreditMode",
    "Entitlement",
    "ExcessPolicy",
    "Service",
    "Tenant",
    "TokenWeights",
    "load_contract",
    "window_index",
    "window_start",
]


class ExcessPolicy(StrEnum):
    """What happens to an assured arrival beyond its floor B."""

    REJECT = "reject"
    DEMOTE = "demote"


class CreditMode(StrEnum):
    """How a request spends floor credit: one per request, or its token weight."""

    COUNT = "count"
    TOKENS = "tokens"


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


# ``defer_build``: a model's validator is built on its first use, not at import; the nested ones
# are then built once, inside `Contract`'s. Importing the contract costs ~8 ms less (every
# command pays it; `rvguard verify` has a 200 ms budget, docs/performance.md).
class Bound(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """A service-time bound ``base + per_token · ℓ`` seconds for ℓ output tokens.

    A plain number in a contract file means ``{base: number, per_token: 0}``.
    """

    base: float = Field(ge=0.0, le=MAX_SPAN)
    per_token: float = Field(default=0.0, ge=0.0, le=MAX_SPAN)

    @field_validator("base", "per_token")
    @classmethod
    def _check_finite(cls, v: float) -> float:
        return _finite(v, "bound")

    @overload
    def at(self, tokens: int | None) -> float: ...
    @overload
    def at(self, tokens: npt.NDArray[Any]) -> npt.NDArray[Any]: ...
    def at(self, tokens: int | npt.NDArray[Any] | None) -> float | npt.NDArray[Any]:
        """The bound for ``tokens`` output tokens (``None`` counts as 0; an array gives an array)."""
        return self.base + self.per_token * (0 if tokens is None else tokens)


def _bound_from_number(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError(f"a bound must be a number or {{base, per_token}}, got {v!r}")
    if isinstance(v, int | float):
        return {"base": float(v), "per_token": 0.0}
    return v


class Service(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """The service envelope: ceilings for the deadline argument, bounds for DR.

    ``s_max`` bounds an assured request's service, ``s_max_opp`` an
    opportunistic one's (it defaults to ``s_max``). ``lower`` is L (a drop is
    doom-sound only if now + L(R) > D(R)); ``upper`` is U, optional, for the
    no-doomed-dispatch property.
    """

    s_max: float = Field(gt=0.0, le=MAX_SPAN)
    s_max_opp: float | None = Field(default=None, gt=0.0, le=MAX_SPAN)
    lower: Bound = Bound(base=0.0)
    upper: Bound | None = None

    @field_validator("lower", "upper", mode="before")
    @classmethod
    def _numbers_are_constant_bounds(cls, v: Any) -> Any:
        return _bound_from_number(v)

    @field_validator("s_max", "s_max_opp")
    @classmethod
    def _check_finite(cls, v: float | None) -> float | None:
        return None if v is None else _finite(v, "ceiling")

    @property
    def opp_ceiling(self) -> float:
        """``s_max_opp``, or ``s_max`` when it is not given."""
        return self.s_max if self.s_max_opp is None else self.s_max_opp


class Tenant(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """One tenant: its floor B per window, relative deadline D, dispatch tier.

    ``s_max`` optionally overrides the contract's assured ceiling for this
    tenant's requests.
    """

    floor: float = Field(default=0, ge=0, le=MAX_FLOOR)
    deadline: float = Field(gt=0.0, le=MAX_SPAN)
    tier: int = Field(default=0, ge=0, le=MAX_TIER)
    s_max: float | None = Field(default=None, gt=0.0, le=MAX_SPAN)

    @field_validator("floor", "deadline")
    @classmethod
    def _check_finite(cls, v: float) -> float:
        return _finite(v, "value")

    @property
    def floored(self) -> bool:
        """True when the tenant holds a non-zero floor (an assured tenant)."""
        return self.floor > 0


class TokenWeights(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """w(R) = prompt · prompt_tokens + output · capped max_tokens (token credits)."""

    prompt: float = Field(default=1.0, ge=0.0, le=MAX_WEIGHT)
    output: float = Field(default=1.0, ge=0.0, le=MAX_WEIGHT)


class Contract(BaseModel, frozen=True, extra="forbid", defer_build=True):
    """An assured-SLO contract (DESIGN §1, file format in DESIGN §8).

    ``reserve`` R (0 ≤ R ≤ C, default 0) is the reserved buffer of DESIGN §10:
    surplus (opportunistic) work never holds more than C − R of the C slots,
    so R slots are always left to floor work (property RB).

    Raises:
        SpecError: on any invalid field, naming the field and the value.
    """

    epoch: float = Field(default=0.0, ge=-MAX_TIME, le=MAX_TIME)
    window: float = Field(ge=MIN_WINDOW, le=MAX_SPAN)
    slots: int = Field(ge=1, le=MAX_SLOTS)
    reserve: int = Field(default=0, ge=0, le=MAX_SLOTS)
    output_cap: int = Field(default=48, ge=1, le=MAX_TOKENS)
    excess: ExcessPolicy = ExcessPolicy.REJECT
    #: DESIGN §12: the factor every floor is lowered to while the assumption watch fires (``None``:
    #: never lowered). An operator's declared choice, recorded in the trace's alerts.
    degrade: float | None = Field(default=None, ge=0.0, le=1.0)
    credit: CreditMode = CreditMode.COUNT
    token_weights: TokenWeights = TokenWeights()
    service: Service
    tenants: dict[str, Tenant] = Field(min_length=1)
    # DESIGN §10, optional (rvguard.runbook_spec): the redline and RL, eviction and EV, fleet and FR
    headroom: HeadroomSpec | None = None
    eviction: EvictionSpec | None = None
    fleet: FleetSpec | None = None

    @field_validator("epoch", "window")
    @classmethod
    def _check_finite(cls, v: float) -> float:
        return _finite(v, "time")

    @model_validator(mode="after")
    def _check_consistency(self) -> Contract:
        # the rule JSON Schema states too comes first, so a refusal for inverted bounds alone
        # means nothing else is wrong (tests/test_schema.py relies on it)
        if self.credit is CreditMode.COUNT:
            for name, tenant in self.tenants.items():
                if tenant.floor != int(tenant.floor):
                    raise ValueError(
                        f"tenants.{name}.floor: count credits need a whole number, got {tenant.floor}"
                    )
        if self.reserve > self.slots:
            raise ValueError(
                f"reserve: R = {self.reserve} exceeds slots C = {self.slots} "
                "(reserve above slots: R of the C slots are held back from surplus work, 0 ≤ R ≤ C)"
            )
        svc = self.service
        if svc.upper is not None:
            for tokens in (0, self.output_cap):  # both bounds are linear: the ends decide
                lo, hi = svc.lower.at(tokens), svc.upper.at(tokens)
                if hi < lo:
                    raise ValueError(
                        f"service.upper: U({tokens}) = {hi:g} s is below "
                        f"L({tokens}) = {lo:g} s (inverted bounds)"
                    )
        if svc.lower.base > svc.s_max:
            raise ValueError(
                f"service.lower: L = {svc.lower.base} s exceeds s_max = {svc.s_max} s (inverted bounds)"
            )
        return self

    # -- lookups -----------------------------------------------------------
    def tenant(self, name: str) -> Tenant:
        """The tenant called ``name``; raises KeyError when absent."""
        return self.tenants[name]

    def tier_of(self, name: str) -> int:
        """Dispatch rank of a tenant (0 first)."""
        return self.tenants[name].tier

    @property
    def floored_tenants(self) -> dict[str, Tenant]:
        """The tenants holding a non-zero floor."""
        return {n: t for n, t in self.tenants.items() if t.floored}

    @property
    def lowest_tier_tenant(self) -> str:
        """The unfloored tenant with the largest tier (where unauthenticated traffic goes)."""
        unfloored = [(t.tier, n) for n, t in self.tenants.items() if not t.floored]
        if not unfloored:
            return max((t.tier, n) for n, t in self.tenants.items())[1]
        return max(unfloored)[1]

    def ceiling(self, tenant: str) -> float:
        """The service ceiling that applies to this tenant's requests."""
        t = self.tenants[tenant]
        if not t.floored:
            return self.service.opp_ceiling
        return self.service.s_max if t.s_max is None else t.s_max

    def backlog_bound(self) -> float:
        """The assured backlog Q_A up to which SF's deadlines are covered: min(Σ B, N_D).

        Why (DESIGN §5, §12): with every service within its ceiling and at most N admitted floor
        requests at once, a request waits behind at most N − 1 of them and, before them, jobs
        holding the slots for at most b: it ends by b + ⌈N/C⌉·ŝ. N_D, the largest N within the
        shortest floored deadline D, is C·⌊(D − b)/ŝ⌋ (0 when D < b + ŝ), with ŝ the largest
        floored ceiling and b the largest ceiling of all (across tiers, the cautious choice). Above
        the bound a miss may be the load's; within it, and within the ceilings, it is the guard's
        when the floored tenants share one tier (with several, later arrivals of a higher tier can
        pass a waiting request: `rvguard verify`'s deadline clause counts them; this bound does not).
        """
        floored = self.floored_tenants
        total = sum(t.floor for t in floored.values())
        if not floored:
            return total
        s_hat = max(self.ceiling(n) for n in floored)
        block = max([self.service.opp_ceiling, *(self.ceiling(n) for n in self.tenants)])
        deadline = min(t.deadline for t in floored.values())
        waves = math.floor((deadline - block) / s_hat + 1e-9) if s_hat > 0 else total
        return min(total, float(self.slots * max(0, waves)))

    def capped_tokens(self, max_tokens: int | None) -> int:
        """Output tokens after the contract's cap (no request is left uncapped)."""
        return self.output_cap if max_tokens is None else min(max_tokens, self.output_cap)

    def lower_bound(self, max_tokens: int | None) -> float:
        """L(R): the DR lower bound at the request's capped output length."""
        return self.service.lower.at(self.capped_tokens(max_tokens))

    def upper_bound(self, max_tokens: int | None) -> float | None:
        """U(R), or None when the contract declares no upper bound."""
        upper = self.service.upper
        return None if upper is None else upper.at(self.capped_tokens(max_tokens))

    def credit_units(self) -> CreditUnits:
        """The contract's credits as whole units, exact for its floors and token weights (`rvguard.exact`)."""
        w = self.token_weights
        floors = {n: t.floor for n, t in self.tenants.items()}
        return credit_units(floors, w.prompt, w.output, count=self.credit is CreditMode.COUNT)

    def weight_units(
        self, prompt_tokens: int | None, max_tokens: int | None, units: CreditUnits | None = None
    ) -> int:
        """Credit a request spends, in ``units`` (default: `credit_units`): exact."""
        u = self.credit_units() if units is None else units
        return u.weight(prompt_tokens or 0, self.capped_tokens(max_tokens))

    def weight(self, prompt_tokens: int | None, max_tokens: int | None) -> float:
        """Credit a request spends: 1 with count credits, w(R) with token credits (nearest float)."""
        u = self.credit_units()
        return u.credits(self.weight_units(prompt_tokens, max_tokens, u))

    def window_index(self, t: float, *, origin: float | None = None) -> int:
        """Index k of the tumbling window ``[t0 + kW, t0 + (k+1)W)`` holding ``t``."""
        return window_index(t, self.epoch if origin is None else origin, self.window)

    def window_start(self, k: int, *, origin: float | None = None) -> float:
        """Start ``t0 + kW`` of window k."""
        return window_start(k, self.epoch if origin is None else origin, self.window)

    def shifted(self, phase: float) -> Contract:
        """The same contract with its window origin moved by ``phase`` seconds."""
        return self.model_copy(update={"epoch": self.epoch + phase})


def window_start(k: int, origin: float, window: float) -> float:
    """Start ``origin + k·window`` of window k, as a float (reports, retry hints).

    Which window a time is in is decided by `window_index`, exactly at the
    edges (`rvguard.exact`).
    """
    return origin + k * window


def _format_location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc if p != "function-after[_check_consistency(), Contract]")


def _problem(item: Mapping[str, Any], where: str) -> SpecError:
    """One of pydantic's errors as a `SpecError` naming its field and value."""
    field = _format_location(item["loc"])
    msg = item["msg"]
    if item["type"] == "value_error" and ": " in msg and not field:
        # model-level checks carry the field in their message: "service.lower: ..."
        msg = msg.removeprefix("Value error, ")
        field, _, msg = msg.partition(": ")
    value = item.get("input")
    got = "" if isinstance(value, dict) else f" (got {shown(value)})"
    return SpecError(f"{where}{printable(field) or 'contract'}: {msg}{got}", field=field, value=value)


INT_MAX = 2**63 - 1  # pydantic reads a whole float into an int field only up to here; so does the schema


def _bare(annotation: Any) -> Any:
    """``annotation`` without its ``Annotated[...]`` metadata (``Annotated[int, Field(ge=1)]`` is int)."""
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation


def _numbers(annotation: Any) -> tuple[type, ...]:
    """The number types a field annotated ``annotation`` holds (() when it holds something else)."""
    annotation = _bare(annotation)
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    args = tuple(map(_bare, typing.get_args(annotation))) if union else (annotation,)
    kinds = tuple(a for a in args if a in (int, float))
    return kinds if kinds and all(a in (int, float, type(None)) for a in args) else ()


def _child(shape: Any, key: Any) -> Any:
    """The annotation of ``key`` inside a value annotated ``shape`` (None: not a known field)."""
    if typing.get_origin(shape) is dict:
        return typing.get_args(shape)[1]
    for model in (shape, *typing.get_args(shape)):
        if isinstance(model, type) and issubclass(model, BaseModel):
            info = model.model_fields.get(str(key))
            return None if info is None else info.annotation
    return None


def _slip(value: Any, annotation: Any) -> str | None:
    """Why ``value`` cannot fill a field annotated ``annotation`` although pydantic would coerce it."""
    kinds = _numbers(annotation)
    if isinstance(value, bool):
        return f"expected a number, got {value!r}"  # no contract field is boolean: `slots: true` slips
    if kinds and isinstance(value, str):  # a quoted number is as likely a typo as a value: refused
        return f"expected a number, got the string {shown(value)} (write it without quotes)"
    if kinds == (int,) and isinstance(value, int | float) and abs(value) > INT_MAX:
        return f"expected a whole number of at most {INT_MAX}, got {shown(value)}"
    return None


def _slips(data: Any, shape: Any = Contract, path: str = "") -> list[SpecError]:
    """Each type slip in ``data`` (a boolean anywhere, a quoted number, an integer out of range),
    naming its field; pydantic would coerce the first two silently."""
    problem = _slip(data, shape) if path else None
    if problem is not None:
        return [SpecError(f"{printable(path)}: {problem}", field=path, value=data)]
    if not isinstance(data, Mapping):
        return []
    return [
        slip
        for key, value in data.items()
        for slip in _slips(value, _child(shape, key), f"{path}.{key}" if path else str(key))
    ]


def _together(errors: Sequence[SpecError]) -> SpecError:
    """One error for all of them: the first's message, then each other on a line of its own."""
    if len(errors) == 1:
        return errors[0]
    first = errors[0]
    message = "".join([str(first), *(f"\n  {e}" for e in errors[1:])])
    return SpecError(message, field=first.field, value=first.value, errors=errors)


def contract_from_mapping(data: Mapping[str, Any], *, source: str = "") -> Contract:
    """Build a contract from parsed YAML/JSON, turning validation errors into `SpecError`.

    Every problem is reported at once (`SpecError.errors`): each type slip and each of
    pydantic's field errors; the cross-field checks run once the fields are valid.
    """
    where = f"{source}: " if source else ""
    errors = [SpecError(f"{where}{e}", field=e.field, value=e.value) for e in _slips(data)]
    try:
        contract = Contract.model_validate(dict(data))
    except pydantic.ValidationError as err:
        slipped = {e.field for e in errors}
        errors += [e for e in (_problem(i, where) for i in err.errors()) if e.field not in slipped]
    if errors:
        raise _together(errors)
    return contract


def _line_of(text: str, field: str) -> int | None:
    """The 1-based line of ``field`` (a dotted path) in YAML/JSON ``text``: its deepest key found."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None
    for key in field.split(".") if field else []:
        if not isinstance(node, yaml.MappingNode):
            break
        match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)
        if match is None:
            break
        line, node = match[0].start_mark.line + 1, match[1]
    return line


def _parse_file(p: Path) -> tuple[str, Any]:
    """The text of a contract file and its parsed data (`rvguard.untrusted`'s rules)."""
    from .untrusted import StructureError, load_json, load_yaml, read_text

    kind = "JSON" if p.suffix.lower() == ".json" else "YAML"
    try:
        text = read_text(p, limit=MAX_SPEC_BYTES)
    except OSError as err:
        raise SpecError(f"{p}: cannot read contract: {err.strerror or err}", field="", value=str(p)) from None
    except StructureError as err:
        raise SpecError(f"{p}: not a contract: {err}") from None
    import yaml

    try:
        return text, load_json(text) if kind == "JSON" else load_yaml(text)
    except StructureError as err:
        where = f"{p}:{err.line}" if err.line else f"{p}"
        raise SpecError(f"{where}: {err}", field=err.key) from None
    except (ValueError, yaml.YAMLError) as err:
        raise SpecError(f"{p}: not valid {kind}: {err}") from None


def load_contract(path: str | Path) -> Contract:
    """Load a contract from a ``.yaml``/``.yml`` or ``.json`` file.

    The file is read under `rvguard.untrusted`'s rules: at most
    ``MAX_SPEC_BYTES``, UTF-8 (a leading BOM is ignored), nesting at most
    ``MAX_DEPTH`` deep, YAML aliases within a budget, no key twice.

    Raises:
        SpecError: unreadable file, bad syntax, or an invalid field.
    """
    p = Path(path)
    text, data = _parse_file(p)
    if not isinstance(data, Mapping):
        raise SpecError(f"{p}: a contract must be a mapping, got {type(data).__name__}")
    try:
        return contract_from_mapping(data, source=str(p))
    except SpecError as err:
        located = sorted((_located(e, text, p) for e in err.errors), key=lambda pair: pair[0])
        raise _together([e for _, e in located]) from None


def _located(err: SpecError, text: str, p: Path) -> tuple[float, SpecError]:
    """(line, the error naming its line): the line of its field in the file, when found."""
    line = _line_of(text, err.field)
    if line is None:
        return math.inf, err
    located = str(err).replace(f"{p}: ", f"{p}:{line}: ", 1)
    return line, SpecError(located, field=err.field, value=err.value)
