"""The columnar (numpy) form of a trace, for offline checking: a data structure, not I/O.

One array per field, one row per event, in trace order. Strings (rids,
tenants, reasons) are dictionary-encoded: the array holds an index into a
names table. Missing values are ``nan`` (floats) or ``-1`` (codes, counts).
Built from events (`ColumnarTrace.from_events`) or directly from Parquet
columns by `rvguard.io`; `events()` gives the rows back as events. Rows of
the DESIGN §10 kinds (sample, route, demote, restore, evict, relocate) keep
their event whole in ``kept`` (the vectorised checks never read them: a
trace with such rows is judged by replay); a node row (``sample``) has rid
code -1. It sits
beside `rvguard.events`, on the floor below both the readers (`rvguard.io`)
and the offline checker (`rvguard.monitors`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .events import EVENT_CLASSES, Admit, Arrive, Basis, Event, EventKind, Proposal
from .lifecycle import ADMIT, ARRIVE, CODE, COMPLETE, DISPATCH, DROP, FAIL, KINDS, REJECT

__all__ = ["BASIS_CODES", "COLUMN_KINDS", "KIND_CODES", "ColumnarTrace"]

KIND_CODES: Mapping[EventKind, int] = CODE  # the lifecycle's codes (kept here for the io readers)
BASIS_CODES: dict[Basis, int] = {b: i for i, b in enumerate(Basis)}
BASES: tuple[Basis, ...] = tuple(Basis)

#: each kind code's record class, and the codes whose records carry a ``reason``
_CLASS_OF: tuple[type[Event], ...] = tuple(EVENT_CLASSES[k] for k in KINDS)
#: the kinds whose fields the columns hold; any other row keeps its event whole (``kept``)
COLUMN_KINDS = frozenset({ARRIVE, ADMIT, REJECT, DISPATCH, COMPLETE, DROP, FAIL})
_REASONED = frozenset(
    c for c, cls in enumerate(_CLASS_OF) if c in COLUMN_KINDS and "reason" in cls.__dataclass_fields__
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]


@dataclass(frozen=True, eq=False)
class ColumnarTrace:
    """A trace as parallel numpy arrays (see the module docstring for encodings).

    ``proposals`` keeps arrive rows' learner proposals (``None`` elsewhere)
    so that `events()` round-trips; offline checks never read it. ``kept``
    holds the whole event of each row whose kind is not in `COLUMN_KINDS`
    (``None`` elsewhere; empty when there is none).
    """

    t: F64
    kind: I8
    rid: I64
    rid_names: tuple[str, ...]
    tenant: I64
    tenant_names: tuple[str, ...]
    deadline: F64
    prompt_tokens: I64
    max_tokens: I64
    basis: I8
    reason: tuple[str, ...]
    line: I64
    proposals: tuple[Proposal | None, ...] = ()
    kept: tuple[Event | None, ...] = ()

    def __len__(self) -> int:
        return int(self.t.shape[0])

    @classmethod
    def from_events(cls, events: Iterable[Event], *, lines: Iterable[int] | None = None) -> ColumnarTrace:
        """Encode events (in trace order) into columns; ``lines`` are their source line numbers."""
        evs = list(events)
        n = len(evs)
        rid_codes: dict[str, int] = {}
        tenant_codes: dict[str, int] = {}
        t = np.empty(n, dtype=np.float64)
        kind = np.empty(n, dtype=np.int8)
        rid = np.empty(n, dtype=np.int64)
        tenant = np.full(n, -1, dtype=np.int64)
        deadline = np.full(n, np.nan, dtype=np.float64)
        prompt = np.full(n, -1, dtype=np.int64)
        maxtok = np.full(n, -1, dtype=np.int64)
        basis = np.full(n, -1, dtype=np.int8)
        reason: list[str] = [""] * n
        proposals: list[Proposal | None] = [None] * n
        kept: list[Event | None] = []
        for i, ev in enumerate(evs):
            t[i] = ev.t
            kind[i] = code = ev.code
            if code not in COLUMN_KINDS:
                if not kept:
                    kept = [None] * n
                kept[i] = ev
                rid[i] = rid_codes.setdefault(ev.rid, len(rid_codes)) if ev.rid else -1
                continue
            rid[i] = rid_codes.setdefault(ev.rid, len(rid_codes))
            if isinstance(ev, Arrive):
                tenant[i] = tenant_codes.setdefault(ev.tenant, len(tenant_codes))
                if ev.deadline is not None:
                    deadline[i] = ev.deadline
                if ev.prompt_tokens is not None:
                    prompt[i] = ev.prompt_tokens
                if ev.max_tokens is not None:
                    maxtok[i] = ev.max_tokens
                proposals[i] = ev.proposal
            elif isinstance(ev, Admit):
                basis[i] = BASIS_CODES[ev.basis]
            elif ev.code in _REASONED:
                reason[i] = getattr(ev, "reason", "")
        line = np.arange(1, n + 1, dtype=np.int64) if lines is None else np.fromiter(lines, np.int64, n)
        return cls(
            t=t,
            kind=kind,
            rid=rid,
            rid_names=tuple(rid_codes),
            tenant=tenant,
            tenant_names=tuple(tenant_codes),
            deadline=deadline,
            prompt_tokens=prompt,
            max_tokens=maxtok,
            basis=basis,
            reason=tuple(reason),
            line=line,
            proposals=tuple(proposals),
            kept=tuple(kept),
        )

    def take(self, rows: npt.NDArray[np.int64]) -> ColumnarTrace:
        """The trace of the given rows (in their order); names tables and codes are kept."""
        keep = rows.tolist()
        return ColumnarTrace(
            t=self.t[rows],
            kind=self.kind[rows],
            rid=self.rid[rows],
            rid_names=self.rid_names,
            tenant=self.tenant[rows],
            tenant_names=self.tenant_names,
            deadline=self.deadline[rows],
            prompt_tokens=self.prompt_tokens[rows],
            max_tokens=self.max_tokens[rows],
            basis=self.basis[rows],
            reason=tuple(self.reason[i] for i in keep),
            line=self.line[rows],
            proposals=tuple(self.proposals[i] for i in keep) if self.proposals else (),
            kept=tuple(self.kept[i] for i in keep) if self.kept else (),
        )

    def event(self, i: int) -> Event:
        """Row ``i`` as an event object."""
        return self.events_at([i])[0]

    def events_at(self, rows: Sequence[int]) -> list[Event]:
        """The events of the given rows, read from the columns in bulk (as `event` would)."""
        idx = np.asarray(rows, dtype=np.int64)
        out: list[Event] = []
        cols = zip(
            rows,
            self.kind[idx].tolist(),
            self.t[idx].tolist(),
            self.rid[idx].tolist(),
            self.tenant[idx].tolist(),
            self.deadline[idx].tolist(),
            self.prompt_tokens[idx].tolist(),
            self.max_tokens[idx].tolist(),
            self.basis[idx].tolist(),
            strict=True,
        )
        for i, kind, t, rid_code, tenant, d, p, m, basis in cols:
            if kind not in COLUMN_KINDS:
                ev = self.kept[i]
                assert ev is not None, f"row {i}: a {KINDS[kind].value} row with no kept event"
                out.append(ev)
                continue
            rid = self.rid_names[rid_code]
            if kind == ARRIVE:
                out.append(
                    Arrive(
                        t=t,
                        rid=rid,
                        tenant=self.tenant_names[tenant],
                        deadline=None if math.isnan(d) else d,
                        prompt_tokens=None if p < 0 else p,
                        max_tokens=None if m < 0 else m,
                        proposal=self.proposals[i] if self.proposals else None,
                    )
                )
            elif kind == ADMIT:
                out.append(Admit(t=t, rid=rid, basis=BASES[basis]))
            elif kind in _REASONED:
                out.append(_CLASS_OF[kind](t=t, rid=rid, reason=self.reason[i]))
            else:
                out.append(_CLASS_OF[kind](t=t, rid=rid))
        return out

    def events(self) -> Iterator[Event]:
        """All rows as events, in trace order."""
        for i in range(len(self)):
            yield self.event(i)
