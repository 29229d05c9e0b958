"""`Request`: its written-out ``__init__`` (compiled in the compiled build) is the frozen dataclass's."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rvguard.enforce.request import Request

_SOME = {
    "rid": "r1",
    "tenant": "x",
    "t": 1.5,
    "deadline": 2.5,
    "prompt_tokens": 3,
    "max_tokens": 4,
    "payload": MappingProxyType({"prompt": "hi"}),
    "pool": "refused",
}


def _same(got: object, want: object) -> bool:
    """Equal and of the same type (a compiled float field is stored unboxed, so not ``is``)."""
    return got == want and type(got) is type(want)


@given(chosen=st.sets(st.sampled_from(list(_SOME))))
def test_init_takes_the_fields_in_order_with_their_defaults(chosen: set[str]) -> None:
    specs = dataclasses.fields(Request)
    assert [f.name for f in specs] == list(_SOME)
    for made in (Request(*_SOME.values()), Request(**_SOME)):  # type: ignore[arg-type]
        assert all(_same(getattr(made, name), v) for name, v in _SOME.items())
    chosen |= {"rid", "tenant", "t"}
    made = Request(**{k: v for k, v in _SOME.items() if k in chosen})  # type: ignore[arg-type]
    for f in specs:
        want = _SOME[f.name] if f.name in chosen else f.default
        if f.name not in chosen and f.default_factory is not dataclasses.MISSING:
            want = f.default_factory()
        assert _same(getattr(made, f.name), want), f.name


def test_a_request_is_frozen_compares_by_its_fields_and_prints_without_payload() -> None:
    a = Request("r1", "x", 1.5, payload={"prompt": "hi"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.t = 2.0  # type: ignore[misc]
    assert a == Request("r1", "x", 1.5) and hash(a) == hash(Request("r1", "x", 1.5))
    assert a != Request("r1", "y", 1.5)
    assert repr(a) == (
        "Request(rid='r1', tenant='x', t=1.5, deadline=None, prompt_tokens=None, max_tokens=None, pool=None)"
    )
    assert dataclasses.replace(a, tenant="y") == Request("r1", "y", 1.5) and not hasattr(a, "__dict__")
    assert a.rebound(tenant="y", t=2.0, max_tokens=5) == Request("r1", "y", 2.0, max_tokens=5)
