"""Progress of long work: the library reports it, and only the command line shows it.

Why a context variable rather than a ``progress=`` argument on every long function: the loops
that take time sit deep (the simulator's event loop, an experiment's runs, the screen's
evaluation grid, a trace check) and many functions stand between them and the command. The CLI
opens a `display` (a tqdm bar on stderr) when stderr is a terminal and ``--json`` is off; every
`task` below it draws a bar. Without a display (library use, tests, a pipe, ``--json``) a task
costs one context-variable lookup and draws nothing. Bars appear only for work that lasts
longer than `DELAY` seconds, and disappear when it is done.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

__all__ = ["DELAY", "REFRESH", "Advance", "display", "showing", "task"]

DELAY = 1.0  # seconds of work before a bar appears: short tasks never flicker
REFRESH = 0.25  # seconds between redraws at most
Advance = Callable[[float], object]  # advance(n): n more units done

_STREAM: ContextVar[TextIO | None] = ContextVar("rvguard_progress_stream", default=None)


def _ignore(_: float) -> None:
    """The advance of a task nobody watches."""


@contextmanager
def display(stream: TextIO | None = None) -> Iterator[None]:
    """Show the progress of every `task` started inside this block on ``stream`` (stderr)."""
    token = _STREAM.set(sys.stderr if stream is None else stream)
    try:
        yield
    finally:
        _STREAM.reset(token)


def showing() -> bool:
    """True inside a `display`: a caller may then spend a little to know a task's total."""
    return _STREAM.get() is not None


@contextmanager
def task(desc: str, *, total: float | None = None, unit: str = "it") -> Iterator[Advance]:
    """One piece of long work; yields ``advance(n)``. Percent and rate when ``total`` is known.

    Args:
        desc: what is being done, e.g. ``"simulating"``.
        total: units to do (None: unknown; the bar then shows a count and a rate).
        unit: the unit's name (``"s"`` of simulated time, ``"run"``, ``"line"``).
    """
    stream = _STREAM.get()
    if stream is None:
        yield _ignore
        return
    from tqdm import tqdm

    with tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=isinstance(total, float),  # simulated seconds: 4.82/120; counts stay whole
        file=stream,
        leave=False,
        delay=DELAY,
        mininterval=REFRESH,
    ) as bar:
        yield bar.update
