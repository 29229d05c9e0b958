"""Parsing untrusted JSON and YAML text with bounded cost and no ambiguity.

The standard parsers trust their input in ways a command-line tool cannot:
``json`` recurses once per nesting level (a line of 100,000 ``[`` raises
`RecursionError`), PyYAML's scanner slows down with the nesting depth and its
composer recurses too, and a YAML "billion laughs" document (anchors whose
aliases expand 9-fold per level) is cheap to load but every later traversal
walks the expanded tree. Both formats also let a key appear twice and keep
one of the two silently, so two tools may read one file differently.

The rules here (bounds in `rvguard.bounds`), each failing with a
`StructureError` that says what and, for YAML, where:

* nesting deeper than ``MAX_DEPTH`` containers is refused, before the
  recursive part of the parser runs (JSON: a scan that skips strings; YAML:
  the event stream, stopped at the first level too many);
* YAML alias expansion is budgeted: the nodes that aliases stand for, counted
  as if expanded, may not exceed ``MAX_ALIAS_NODES``;
* a duplicate key in a JSON object or a YAML mapping is refused (YAML merge
  keys ``<<`` still override, as the merge spec says);
* an unquoted number with an exponent and no dot (``1e-3``) is a float, as in
  YAML 1.2 and JSON (PyYAML's YAML 1.1 reads it as a string).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .bounds import MAX_ALIAS_NODES, MAX_DEPTH

__all__ = ["StructureError", "json_duplicate_hook", "json_too_deep", "load_json", "load_yaml", "read_text"]

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class StructureError(ValueError):
    """A document too deep, too alias-expanded, or with a duplicate key.

    Callers turn it into their own located error (`SpecError`, `TraceFormatError`).

    Attributes:
        line: 1-based line of the offending node (YAML; 0 when unknown).
        key: the duplicated key, ``""`` for other faults.
    """

    def __init__(self, message: str, *, line: int = 0, key: str = "") -> None:
        self.line = line
        self.key = key
        super().__init__(message)


def _deep(limit: int) -> StructureError:
    return StructureError(f"nested deeper than {limit} levels")


def json_too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when JSON ``text`` nests containers deeper than ``limit``.

    Cost: two ``str.count`` calls when the text holds at most ``limit``
    brackets (every ordinary record); otherwise one regex pass that skips
    strings. Malformed text may be judged too deep; it is refused either way.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def json_duplicate_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An ``object_pairs_hook`` that refuses an object naming a key twice."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise StructureError(f"duplicate key {key!r}", key=key)
            seen.add(key)
    return obj


def load_json(text: str, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """Parse a JSON document under the rules of this module.

    Raises:
        StructureError: too deep, or a duplicate key.
        ValueError: malformed JSON (`json.JSONDecodeError`), or an integer
            beyond Python's digit limit.
    """
    if json_too_deep(text):
        raise _deep(MAX_DEPTH)
    return json.loads(text, object_pairs_hook=json_duplicate_hook, parse_constant=parse_constant)


def load_yaml(text: str) -> Any:
    """Parse one YAML document (the safe subset) under the rules of this module.

    Raises:
        StructureError: too deep, an alias expansion over budget, or a duplicate key.
        yaml.YAMLError: malformed YAML.
        ValueError: an integer beyond Python's digit limit.
    """
    import yaml

    _prescan(yaml, text)
    return yaml.load(text, Loader=_loader_class(yaml))  # a SafeLoader subclass


def _prescan(yaml: Any, text: str) -> None:
    """Walk the event stream: stop at the first level too deep or the alias budget exceeded."""
    sizes: dict[str, int] = {}  # anchor -> nodes it stands for, expanded
    stack: list[list[Any]] = []  # open collections: [anchor, nodes so far]
    expanded = 0
    for event in yaml.parse(text):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise StructureError(f"nested deeper than {MAX_DEPTH} levels", line=_line(event))
            stack.append([event.anchor, 1])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, nodes = stack.pop()
        elif isinstance(event, yaml.AliasEvent):
            anchor, nodes = None, sizes.get(event.anchor, 1)
            expanded += nodes
            if expanded > MAX_ALIAS_NODES:
                raise StructureError(
                    f"aliases expand to more than {MAX_ALIAS_NODES:,} nodes (an alias bomb?)",
                    line=_line(event),
                )
        elif isinstance(event, yaml.ScalarEvent):
            anchor, nodes = event.anchor, 1
        else:
            continue
        if anchor is not None:
            sizes[anchor] = nodes
        if stack:
            stack[-1][1] += nodes


def _line(event: Any) -> int:
    mark = getattr(event, "start_mark", None)
    return 0 if mark is None else int(mark.line) + 1


_LOADER: list[type] = []
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


def _loader_class(yaml: Any) -> type:
    """A SafeLoader that refuses a key written twice in one mapping (built once, yaml imported lazily)."""
    if _LOADER:
        return _LOADER[0]

    class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base class says so with its mark
                    break
                if duplicate:
                    raise StructureError(f"duplicate key {key!r}", line=_line(key_node), key=str(key))
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    # YAML 1.2 floats: PyYAML (YAML 1.1) reads an unquoted ``1e-3`` as a string.
    _StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))
    _LOADER.append(_StrictLoader)
    return _StrictLoader


def read_text(path: Any, *, limit: int) -> str:
    """A small text file as str: at most ``limit`` bytes of UTF-8, one leading BOM ignored.

    Raises:
        StructureError: larger than ``limit``, or not UTF-8 text (a binary file).
        OSError: the file cannot be read.
    """
    with open(path, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise StructureError(f"larger than {limit:,} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise StructureError(f"not UTF-8 text (bad byte at offset {exc.start}): a binary file?") from None
