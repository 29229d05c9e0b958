"""JSON Schemas of rvguard's two file formats: the contract and the trace record (``rvguard schema``).

The contract's schema is generated from the model (`Contract.model_json_schema`) and then told
what the loader adds around the model, so that the schema accepts a document exactly when
`rvguard.contract.load_contract` does (`tests/test_schema.py` checks both directions with
hypothesis): a plain number where a bound goes (``lower: 0.236`` means ``{base: 0.236}``),
whole floors under count credits, integers up to 2⁶³ − 1. Booleans and quoted numbers are
refused by both (JSON Schema's ``number`` excludes them). Three cross-field rules cannot be
written in JSON Schema; the loader checks them and the schema's description names them. JSON
has no NaN or infinity; YAML does, and the loader refuses them. The trace record's schema is
the shipped ``specs/trace.schema.json``.
"""

from __future__ import annotations

import json
from typing import Any

from .contract import INT_MAX, Bound, Contract
from .data import SPECS

__all__ = ["SCHEMA_URI", "contract_schema", "trace_schema"]

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"
_BOUND = f"#/$defs/{Bound.__name__}"
_CROSS_FIELD = (
    "The loader also checks rules JSON Schema cannot state: reserve R ≤ slots C, "
    "service.lower L ≤ service.s_max, U(ℓ) ≥ L(ℓ) at ℓ = 0 and ℓ = output_cap when "
    "service.upper is given, and for each headroom resource margin ≤ 1 − h_min and hard_floor ≤ h_min."
)


def _as_loaded(node: Any, base: dict[str, Any]) -> Any:
    """The loader's rules on top of the model's schema: every place a `Bound` goes also takes a
    plain number, read as its ``base`` (so within ``base``'s own limits), and an integer field
    takes nothing above `INT_MAX`."""
    if isinstance(node, list):
        return [_as_loaded(n, base) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _as_loaded(v, base) for k, v in node.items() if not (k == "$ref" and v == _BOUND)}
    if node.get("$ref") == _BOUND:
        out["anyOf"] = [base, {"$ref": _BOUND}]
    if node.get("type") == "integer":
        out["maximum"] = min(node.get("maximum", INT_MAX), INT_MAX)
    return out


def contract_schema() -> dict[str, Any]:
    """The contract's JSON Schema (draft 2020-12), accepting what `load_contract` accepts."""
    generated = Contract.model_json_schema(mode="validation")
    base = generated["$defs"][Bound.__name__]["properties"]["base"]
    schema: dict[str, Any] = _as_loaded(generated, {k: v for k, v in base.items() if k != "title"})
    schema["if"] = {"properties": {"credit": {"const": "tokens"}}, "required": ["credit"]}
    schema["else"] = {  # count credits (the default): a floor is a whole number of requests
        "properties": {"tenants": {"additionalProperties": {"properties": {"floor": {"type": "integer"}}}}}
    }
    schema["description"] = f"An rvguard assured-SLO contract (DESIGN §1, §8), YAML or JSON. {_CROSS_FIELD}"
    return {"$schema": SCHEMA_URI, "title": "rvguard contract", **schema}


def trace_schema() -> dict[str, Any]:
    """The JSON Schema of one trace record (``specs/trace.schema.json``)."""
    loaded: dict[str, Any] = json.loads((SPECS / "trace.schema.json").read_text(encoding="utf-8"))
    return loaded
