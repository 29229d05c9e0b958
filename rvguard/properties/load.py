"""Property tables from YAML (or JSON) files: read once, every error with its file, line and field.

The file's shape is ``specs/property.schema.json``::

    name: TENANT_CONCURRENCY
    description: at most k requests of a tenant in flight
    params: {k: 2}
    locations: [NEW, QUEUED, RUNNING, OVER, DONE]
    initial: NEW
    bad: OVER
    counters:
      running: {scope: tenant}          # request | tenant | tenant_window | shared; initial: 0
    edges:
      - {from: NEW, event: admit, to: QUEUED}
      - {from: QUEUED, event: dispatch, guard: running + 1 <= k, update: [running += 1], to: RUNNING}
      - {from: QUEUED, event: dispatch, guard: not (running + 1 <= k), update: [running += 1],
         to: OVER, remedy: delay}

A file may hold one table or ``properties: [table, ...]``. The reader is
`rvguard.untrusted`'s (size, depth, aliases, duplicate keys); the table is
then checked by `rvguard.properties.table.PropertyTable` (names, locations,
remedies), and each problem is reported as ``file:line: field: message``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .table import Counter, Edge, PropertyTable, Scope, edge

__all__ = ["MAX_PROPERTY_BYTES", "load_properties", "table_from_mapping"]

#: the largest property file read
MAX_PROPERTY_BYTES = 1 << 20
_TOP = {"name", "description", "params", "locations", "initial", "bad", "counters", "edges", "monitor_only"}
_EDGE = {"from", "event", "to", "guard", "update", "remedy", "controllable"}


def _need(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        what = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SpecError(f"{where}{key}: must be a {what}, got {value!r}", field=f"{where}{key}", value=value)
    return value


def _unknown(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(str(k) for k in data if k not in allowed)
    if extra:
        raise SpecError(
            f"{where}{extra[0]}: unknown field (allowed: {', '.join(sorted(allowed))})",
            field=f"{where}{extra[0]}",
        )


def _edge(data: Any, i: int) -> Edge:
    where = f"edges.{i}."
    if not isinstance(data, Mapping):
        raise SpecError(f"edges.{i}: an edge is a mapping", field=f"edges.{i}")
    _unknown(data, _EDGE, where)
    updates = data.get("update", [])
    if isinstance(updates, str):
        updates = [updates]
    if not isinstance(updates, list) or not all(isinstance(u, str) for u in updates):
        raise SpecError(f"{where}update: a list of updates (name += e)", field=f"{where}update")
    guard = data.get("guard", "")
    controllable = data.get("controllable")
    return edge(
        _need(data, "from", str, where),
        _need(data, "event", str, where),
        _need(data, "to", str, where),
        guard if isinstance(guard, str) else str(guard),
        updates,
        _need(data, "remedy", str, where) if "remedy" in data else None,
        controllable=controllable if isinstance(controllable, bool) else None,
        where=f"edges.{i}",
    )


def _counters(data: Any) -> tuple[Counter, ...]:
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise SpecError("counters: a mapping of name to {scope, initial}", field="counters")
    out = []
    for name, spec in data.items():
        where = f"counters.{name}."
        spec = {"scope": spec} if isinstance(spec, str) else spec
        if not isinstance(spec, Mapping):
            raise SpecError(f"counters.{name}: needs a scope", field=f"counters.{name}")
        _unknown(spec, {"scope", "initial"}, where)
        try:
            scope = Scope(_need(spec, "scope", str, where))
        except ValueError:
            raise SpecError(f"{where}scope: one of {', '.join(Scope)}", field=f"{where}scope") from None
        initial = spec.get("initial", 0)
        if isinstance(initial, str) and initial.strip() in ("inf", "-inf"):
            initial = float(initial)
        if not isinstance(initial, int | float) or isinstance(initial, bool) or math.isnan(initial):
            raise SpecError(f"{where}initial: a number", field=f"{where}initial", value=initial)
        out.append(Counter(str(name), scope, float(initial)))
    return tuple(out)


def table_from_mapping(data: Mapping[str, Any], source: str = "") -> PropertyTable:
    """Build a table from its mapping form (see the module docstring).

    Raises:
        SpecError: a missing or ill-typed field, or a table that does not check (``field`` names it).
    """
    _unknown(data, _TOP, "")
    edges = _need(data, "edges", list, "")
    locations = _need(data, "locations", list, "")
    if not all(isinstance(x, str) for x in locations):
        raise SpecError("locations: a list of names", field="locations")
    params = data.get("params") or {}
    if not isinstance(params, Mapping):
        raise SpecError("params: a mapping of name to number", field="params")
    return PropertyTable(
        name=_need(data, "name", str, ""),
        description=str(data.get("description", "")),
        locations=tuple(locations),
        initial=_need(data, "initial", str, ""),
        bad=_need(data, "bad", str, ""),
        edges=tuple(_edge(e, i) for i, e in enumerate(edges)),
        counters=_counters(data.get("counters")),
        params=dict(params),
        monitor_only=bool(data.get("monitor_only", False)),
        source=source,
    )


def load_properties(path: str | Path) -> list[PropertyTable]:
    """The tables of a ``.yaml``/``.yml``/``.json`` file (one table, or ``properties: [...]``).

    Raises:
        SpecError: unreadable, malformed, or a bad field; the message starts ``file:line:``.
    """
    p = Path(path)
    text, data = _read(p)
    items = data.get("properties") if isinstance(data, Mapping) and "properties" in data else [data]
    if not isinstance(items, list):
        raise SpecError(f"{p}: properties: a list of tables", field="properties")
    out = []
    for i, item in enumerate(items):
        prefix = f"properties.{i}." if len(items) > 1 or "properties" in data else ""
        if not isinstance(item, Mapping):
            raise SpecError(f"{p}: {prefix or 'the file'} must be a mapping (a property table)", field=prefix)
        try:
            out.append(table_from_mapping(item, source=str(p)))
        except SpecError as err:
            head, _, last = err.field.rpartition(".")
            field = prefix + (f"{head}.{_YAML_KEY[last]}" if last in _YAML_KEY else err.field)
            line = _line(text, field)
            where = f"{p}:{line}" if line else str(p)
            message = str(err).removeprefix(f"{p}: ")
            message = message if not field or field in message else f"{field}: {message}"
            raise SpecError(f"{where}: {message}", field=field, value=err.value) from None
    return out


#: the table's field names as the file spells them
_YAML_KEY = {"kind": "event", "target": "to", "updates": "update"}


def _read(p: Path) -> tuple[str, Any]:
    import yaml

    from ..untrusted import StructureError, load_json, load_yaml, read_text

    try:
        text = read_text(p, limit=MAX_PROPERTY_BYTES)
        return text, load_json(text) if p.suffix.lower() == ".json" else load_yaml(text)
    except OSError as err:
        raise SpecError(f"{p}: cannot read property file: {err.strerror or err}", value=str(p)) from None
    except StructureError as err:
        where = f"{p}:{err.line}" if err.line else f"{p}"
        raise SpecError(f"{where}: {err}", field=err.key) from None
    except (ValueError, yaml.YAMLError) as err:
        raise SpecError(f"{p}: not valid YAML or JSON: {err}") from None


def _line(text: str, field: str) -> int | None:
    """The 1-based line of a dotted field (list items by index) in YAML or JSON text."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None
    for key in [k for k in field.split(".") if k]:
        if isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
            node = node.value[int(key)]
            line = node.start_mark.line + 1
        elif isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        else:
            break
    return line
