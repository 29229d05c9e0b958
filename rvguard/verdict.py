"""Verdicts are values: a property either holds so far or is violated, with a witness."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .events import Event, event_to_dict

__all__ = ["Violation"]


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Violation:
    """A property reached a bad location.

    Attributes:
        property: the property's name (``AF``, ``SF``, ``DR``, ``WF``, ...).
        rid: the request whose instance went bad.
        t: the time of the violation (for SF's timer edge: the deadline instant).
        witness: the request's events that form the bad prefix, in trace order.
        detail: one sentence a person can act on.
        context: property-specific facts, e.g. AF's window entitlement count.
    """

    property: str
    rid: str
    t: float
    witness: tuple[Event, ...]
    detail: str = ""
    context: Mapping[str, Any] = field(default_factory=_empty, compare=False, hash=False)

    @builtins.property
    def key(self) -> tuple[float, str, str]:
        """Canonical sort key: (time, property, rid)."""
        return (self.t, self.property, self.rid)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form: property, rid, t, witness (records), detail, context."""
        return {
            "property": self.property,
            "rid": self.rid,
            "t": self.t,
            "witness": [event_to_dict(e) for e in self.witness],
            "detail": self.detail,
            "context": dict(self.context),
        }
