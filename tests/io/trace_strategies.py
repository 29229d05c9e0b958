"""Hypothesis strategies for events, shared by the round-trip tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from rvguard.events import (
    Admit,
    Arrive,
    Basis,
    Complete,
    Demote,
    Dispatch,
    Drop,
    Event,
    Evict,
    Fail,
    Proposal,
    Reject,
    Relocate,
    Restore,
    Route,
    RouteMode,
    Sample,
)

times = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=8)
# CSV keeps strings as strings only where they cannot be read as numbers.
words = st.from_regex(r"[a-z_][a-z0-9_ é]{0,7}", fullmatch=True).filter(
    lambda s: s not in ("true", "false", "nan", "inf", "infinity", "e")
)
counts = st.none() | st.integers(min_value=0, max_value=10**6)
proposals = st.none() | st.builds(
    Proposal,
    admit=st.booleans(),
    objective=st.none() | words,
    priority_hint=st.none() | st.floats(allow_nan=False, allow_infinity=False, width=64),
)
_EXTRA_KEYS = st.sampled_from(["note", "model", "score", "session"])
extra_values = st.integers(-(10**9), 10**9) | st.floats(allow_nan=False, allow_infinity=False) | words
extras: st.SearchStrategy[dict[str, Any]] = st.dictionaries(_EXTRA_KEYS, extra_values, max_size=2)


def events(*, text: st.SearchStrategy[str] = words, extra: bool = True) -> st.SearchStrategy[Event]:
    """Any event; ``text`` draws rids, tenants and reasons."""
    ex = extras if extra else st.just({})
    arrive = st.builds(
        Arrive,
        t=times,
        rid=text,
        tenant=text,
        deadline=st.none() | times,
        prompt_tokens=counts,
        max_tokens=counts,
        proposal=proposals,
        extra=ex,
    ).map(_deadline_not_before_t)
    admit = st.builds(Admit, t=times, rid=text, basis=st.sampled_from(Basis), extra=ex)
    ending = st.sampled_from([Reject, Drop, Fail]).flatmap(
        lambda cls: st.builds(cls, t=times, rid=text, reason=st.just("") | text, extra=ex)
    )
    plain = st.sampled_from([Dispatch, Complete]).flatmap(
        lambda cls: st.builds(cls, t=times, rid=text, extra=ex)
    )
    return st.one_of(arrive, admit, ending, plain, _runbook(text, ex))


def _runbook(text: st.SearchStrategy[str], ex: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Event]:
    """The DESIGN §10 kinds, every field drawn (a sample has no rid)."""
    fraction = st.floats(min_value=0, max_value=1)
    sample = st.builds(Sample, t=times, resource=text, value=fraction, sample_time=times, extra=ex)
    route = st.builds(
        Route,
        t=times,
        rid=text,
        engine=text,
        view_time=st.none() | times,
        mode=st.sampled_from(RouteMode),
        extra=ex,
    )
    redline = st.sampled_from([Demote, Restore]).flatmap(
        lambda cls: st.builds(cls, t=times, rid=text, resource=text, sample_time=times, extra=ex)
    )
    state = st.integers(min_value=0, max_value=2**31 - 1)
    evict = st.builds(
        Evict,
        t=times,
        rid=text,
        state=state,
        reason=st.just("") | text,
        resource=st.none() | text,
        headroom=st.none() | fraction,
        target=st.none() | st.floats(min_value=0, max_value=1, exclude_min=True),
        capacity=st.none() | st.integers(min_value=1, max_value=2**31 - 1),
        extra=ex,
    )
    relocate = st.builds(Relocate, t=times, rid=text, engine=text, extra=ex)
    return st.one_of(sample, route, redline, evict, relocate)


def _deadline_not_before_t(ev: Arrive) -> Arrive:
    """Readers refuse an absolute deadline before its arrival: move such a deadline to ``t``."""
    if ev.deadline is None or ev.deadline >= ev.t:
        return ev
    return replace(ev, deadline=ev.t)


def same(a: list[Event], b: list[Event]) -> bool:
    """Events equal including their extras (dataclass equality ignores ``extra``)."""
    return a == b and [dict(x.extra) for x in a] == [dict(y.extra) for y in b]
