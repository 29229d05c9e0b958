"""``/metrics`` without tenant names: each ``tenant`` label replaced by a stable alias.

Tenant names can say who a provider's customers are; a scraper that need not know them sees
``tenant="tenant0"``, ``tenant="tenant1"``, … in the contract's order (the operator maps them
back from the contract). Applied to the rendered exposition, so every series is covered,
present and future.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..contract import Contract

__all__ = ["tenant_aliases", "without_tenant_names"]

_LABEL = re.compile(rb'(?<![A-Za-z0-9_])tenant="((?:[^"\\]|\\.)*)"')


def tenant_aliases(contract: Contract) -> dict[str, str]:
    """Each tenant's alias: ``tenant<i>``, ``i`` its position in the contract."""
    return {name: f"tenant{i}" for i, name in enumerate(contract.tenants)}


def without_tenant_names(text: bytes, aliases: Mapping[str, str]) -> bytes:
    """``text`` (Prometheus exposition) with every ``tenant`` label value replaced by its alias
    (``other`` for a value that is no tenant of the contract)."""
    table = {name.encode(): alias.encode() for name, alias in aliases.items()}
    return _LABEL.sub(lambda m: b'tenant="' + table.get(m.group(1), b"other") + b'"', text)
