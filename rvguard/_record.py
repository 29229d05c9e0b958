"""`record`: the decorator of the event records, frozen to the type checker, cheap at run time.

Why: the decision core builds four events per request, and a frozen dataclass
pays ``object.__setattr__`` for every field (an `Arrive` cost 0.9 µs frozen,
0.2 µs as a plain slotted dataclass, measured on CPython 3.11). So at run time
a record is a dataclass with value equality and a field hash (``unsafe_hash``:
the same ``__eq__``, ``__hash__``, ``__repr__``, `dataclasses.replace` and
`dataclasses.fields` as the frozen form), slotted when interpreted; to mypy it
is a frozen dataclass (``record`` *is* `dataclasses.dataclass` to the type
checker, so an assignment to a field outside ``__init__`` is a type error).
Records are immutable by convention, enforced statically; nothing in rvguard
writes to one.

In the compiled build (issue 16) mypyc sees `dataclasses.dataclass` too and
makes each record a native class; its ``__init__``, written in the record's
body, is then compiled (≈ 30 ns instead of the interpreted dataclass
``__init__``'s ≈ 300 ns). Each record writes that ``__init__`` out: the test
`tests/test_events.py` holds its signature to the one the dataclass would
generate from the fields. mypyc hands a native class's annotations to the
dataclass decorator with ``ClassVar`` stripped, so the records' class
attributes (`CLASS_ATTRIBUTES`) are dropped from them here, never fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

__all__ = ["CLASS_ATTRIBUTES", "record"]

_T = TypeVar("_T")

#: the records' class attributes (``ClassVar``): never fields
CLASS_ATTRIBUTES = ("kind", "code")

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:

    def record(*, frozen: bool, unsafe_hash: bool) -> Callable[[type[_T]], type[_T]]:
        """The run-time decorator: a dataclass, not frozen (``frozen`` is for the type checker),
        slotted when interpreted (a native compiled class has its attributes in C already)."""

        def build(cls: type[_T]) -> type[_T]:
            native = "__mypyc_attrs__" in vars(cls)
            if native:  # mypyc's annotations lost their ClassVar: keep the class attributes out
                annotations = vars(cls)["__annotations__"]
                for name in CLASS_ATTRIBUTES:
                    annotations.pop(name, None)
            return dataclass(cls, slots=not native, unsafe_hash=unsafe_hash)

        return build
