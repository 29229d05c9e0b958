"""Event records: validation names the field; unknown fields are kept; round trip."""

from __future__ import annotations

from dataclasses import MISSING, field, fields, make_dataclass, replace
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.errors import TraceFormatError
from rvguard.events import (
    EVENT_CLASSES,
    Admit,
    Arrive,
    Basis,
    Complete,
    Dispatch,
    Drop,
    Fail,
    Proposal,
    Reject,
    RouteMode,
    event_from_dict,
    event_to_dict,
)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"kind": "arrive", "rid": "a", "tenant": "x"}, "t"),
        ({"t": 1.0, "rid": "a"}, "kind"),
        ({"t": 1.0, "kind": "teleport", "rid": "a"}, "kind"),
        ({"t": float("nan"), "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": float("inf"), "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": -0.5, "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": "1", "kind": "dispatch", "rid": "a"}, "t"),
        ({"t": 1.0, "kind": "dispatch", "rid": ""}, "rid"),
        ({"t": 1.0, "kind": "arrive", "rid": "a"}, "tenant"),
        ({"t": 1.0, "kind": "arrive", "rid": "a", "tenant": "x", "max_tokens": float("nan")}, "max_tokens"),
        ({"t": 1.0, "kind": "arrive", "rid": "a", "tenant": "x", "prompt_tokens": 1.5}, "prompt_tokens"),
        (
            {"t": 1.0, "kind": "arrive", "rid": "a", "tenant": "x", "proposal": {"admit": "yes"}},
            "proposal.admit",
        ),
        (
            {
                "t": 1.0,
                "kind": "arrive",
                "rid": "a",
                "tenant": "x",
                "proposal": {"priority_hint": float("nan")},
            },
            "proposal.priority_hint",
        ),
        ({"t": 1.0, "kind": "admit", "rid": "a", "basis": "vip"}, "basis"),
        # DESIGN §10
        ({"t": 1.0, "kind": "sample", "rid": "a", "resource": "kv", "value": 0.5, "sample_time": 1}, "rid"),
        ({"t": 1.0, "kind": "sample", "value": 0.5, "sample_time": 1}, "resource"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": 1.5, "sample_time": 1}, "value"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": True, "sample_time": 1}, "value"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": 0.5}, "sample_time"),
        ({"t": 1.0, "kind": "sample", "resource": "kv", "value": 0.5, "sample_time": -1}, "sample_time"),
        ({"t": 1.0, "kind": "demote", "rid": "a", "sample_time": 1}, "resource"),
        ({"t": 1.0, "kind": "restore", "rid": "a", "resource": "kv", "sample_time": None}, "sample_time"),
        ({"t": 1.0, "kind": "evict", "rid": "a"}, "state"),
        ({"t": 1.0, "kind": "evict", "rid": "a", "state": 2.5}, "state"),
        ({"t": 1.0, "kind": "relocate", "rid": "a", "engine": ""}, "engine"),
        ({"t": 1.0, "kind": "route", "rid": "a"}, "engine"),
        ({"t": 1.0, "kind": "route", "rid": "a", "engine": "e", "mode": "argmax"}, "mode"),
        ({"t": 1.0, "kind": "route", "rid": "a", "engine": "e", "view_time": float("nan")}, "view_time"),
        ({"t": 1.0, "kind": "route", "engine": "e"}, "rid"),
    ],
)
def test_bad_records_name_the_field(record: dict[str, Any], field: str) -> None:
    with pytest.raises(TraceFormatError) as info:
        event_from_dict(record)
    assert info.value.field == field


def test_unknown_fields_are_kept_and_written_back() -> None:
    rec = {
        "t": 1.0,
        "kind": "arrive",
        "rid": "a",
        "tenant": "x",
        "region": "eu",
        "proposal": {"admit": False},
    }
    ev = event_from_dict(rec)
    assert isinstance(ev, Arrive)
    assert ev.extra == {"region": "eu"}
    assert event_to_dict(ev) == rec


def test_integer_rids_are_read_as_strings() -> None:
    assert event_from_dict({"t": 0, "kind": "dispatch", "rid": 7}).rid == "7"


def test_runbook_records_round_trip_and_a_sample_has_no_rid() -> None:
    from rvguard.events import PREEMPTED, Route, RouteMode, Sample

    rec = {"t": 2.0, "kind": "sample", "resource": "kv", "value": 0.25, "sample_time": 1.5, "gpu": 1}
    ev = event_from_dict(rec)
    assert isinstance(ev, Sample) and ev.rid == "" and dict(ev.extra) == {"gpu": 1}
    assert event_to_dict(ev) == {**rec, "t": 2.0}
    route = event_from_dict({"t": 1, "kind": "route", "rid": "a", "engine": "e1", "mode": None})
    assert route == Route(1.0, "a", "e1", None, RouteMode.P2C)  # absent or null mode: p2c
    assert event_to_dict(route) == {"t": 1.0, "kind": "route", "rid": "a", "engine": "e1", "mode": "p2c"}
    assert PREEMPTED == "preempted"


_FIELD_VALUES = {
    "t": st.floats(0, 1e6),
    "rid": st.sampled_from(["a", "b"]),
    "tenant": st.sampled_from(["x", "y"]),
    "reason": st.sampled_from(["", "doomed"]),
    "deadline": st.none() | st.floats(0, 1e6),
    "max_tokens": st.none() | st.integers(0, 9),
    "basis": st.sampled_from(list(Basis)),
}


def _frozen_twin(cls: type) -> type:
    """The same fields as a frozen dataclass: the reference the cheap records must behave as."""
    specs = []
    for f in fields(cls):
        default = {} if f.default is MISSING else {"default": f.default}
        if f.default_factory is not MISSING:
            default = {"default_factory": f.default_factory}
        specs.append((f.name, f.type, field(compare=f.compare, hash=f.hash, repr=f.repr, **default)))
    return make_dataclass("Frozen" + cls.__name__, specs, frozen=True)


@given(data=st.data(), cls=st.sampled_from([Arrive, Admit, Reject, Dispatch, Complete, Drop, Fail]))
def test_records_compare_hash_and_print_as_frozen_dataclasses(data: st.DataObject, cls: type) -> None:
    """Records are plain slotted dataclasses at run time (cheap to build, `rvguard._record`): value
    equality, a field hash and the repr are those of a frozen dataclass; ``extra`` is not compared."""
    names = [f.name for f in fields(cls) if f.name in _FIELD_VALUES]
    a = {n: data.draw(_FIELD_VALUES[n], label=n) for n in names}
    b = {n: data.draw(_FIELD_VALUES[n], label=n) for n in names}
    twin = _frozen_twin(cls)
    x, y = cls(**a), cls(**b, extra={"note": 1})
    tx, ty = twin(**a), twin(**b, extra={"note": 1})
    assert (x == y) == (tx == ty) == (a == b)
    assert hash(x) == hash(tx) and hash(y) == hash(ty)
    assert repr(x) == repr(tx).replace("Frozen" + cls.__name__, cls.__name__, 1)
    assert replace(y, extra={}) == y and not hasattr(x, "__dict__")


#: a value of each field's type, distinct from its default (the compiled build checks the types)
_SOME = {
    "t": 1.5,
    "rid": "r",
    "tenant": "x",
    "deadline": 2.5,
    "prompt_tokens": 3,
    "max_tokens": 4,
    "proposal": Proposal(admit=False),
    "basis": Basis.FLOOR,
    "reason": "why",
    "extra": MappingProxyType({"note": 1}),
    "resource": "kv",
    "value": 0.5,
    "sample_time": 0.25,
    "engine": "e1",
    "view_time": 0.75,
    "mode": RouteMode.SILOED,
    "state": 7,
    "headroom": 0.125,
    "target": 0.375,
    "capacity": 9,
    "lag": 0.625,
    "condition": "service",
    "bound": 0.25,
    "since": 1.0,
    "floor_scale": 0.5,
}


@given(data=st.data(), cls=st.sampled_from(list(EVENT_CLASSES.values())))
def test_written_init_takes_the_fields_in_order_with_their_defaults(data: st.DataObject, cls: type) -> None:
    """A record's ``__init__`` is written out (`rvguard._record`: compiled natively): it takes every
    field, by position or by name, in the fields' order, and a field left out gets its default."""
    specs = fields(cls)
    values = {f.name: _SOME[f.name] for f in specs}
    for made in (cls(*values.values()), cls(**values)):
        assert all(_same(getattr(made, name), v) for name, v in values.items())
    required = {f.name for f in specs if f.default is MISSING and f.default_factory is MISSING}
    chosen = data.draw(st.sets(st.sampled_from(list(values))), label="given") | required
    made = cls(**{name: v for name, v in values.items() if name in chosen})
    for f in specs:
        want = values[f.name] if f.name in chosen else f.default
        if f.name not in chosen and f.default_factory is not MISSING:
            want = f.default_factory()
        assert _same(getattr(made, f.name), want), f.name


def _same(got: object, want: object) -> bool:
    """Equal and of the same type (a compiled record keeps a float field unboxed, so not ``is``)."""
    return got == want and type(got) is type(want)
