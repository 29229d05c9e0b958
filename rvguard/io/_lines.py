"""Lines of an untrusted file, each at most `MAX_LINE_BYTES` long (one home for every reader).

Iterating a file object reads a whole line whatever its length: a file with no newline (a link to
``/dev/zero``, a corrupt dump) grows the reader without bound until the kernel kills it. Here each
line is read with ``readline(limit + 1)``, so memory stays bounded; a line longer than the limit
raises a located `LineTooLongError` (``file:line: line longer than N bytes``). It is raised, never
yielded as a lenient reader's error value: what follows a line that has no end cannot be read,
so the whole file is bad input (exit 2), at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, AnyStr

from ..bounds import MAX_LINE_BYTES
from ..errors import LineTooLongError

__all__ = ["bounded_lines", "line_too_long"]


def line_too_long(name: str, line: int, limit: int = MAX_LINE_BYTES, unit: str = "bytes") -> LineTooLongError:
    """The error a reader raises for a line over ``limit``."""
    return LineTooLongError(f"line longer than {limit:,} {unit}", path=name, line=line)


def bounded_lines(stream: IO[AnyStr], name: str, *, limit: int = MAX_LINE_BYTES) -> Iterator[AnyStr]:
    """Each line of ``stream`` with its line end, as iterating it would give them, up to ``limit``.

    Raises:
        LineTooLongError: a line (without its ``\\n``) longer than ``limit`` (text streams count
            characters), located at its line.
    """
    line = 0
    while True:
        chunk = stream.readline(limit + 1)
        if not chunk:
            return
        line += 1
        if len(chunk) > limit and chunk[-1:] not in ("\n", b"\n"):
            raise line_too_long(name, line, limit, "bytes" if isinstance(chunk, bytes) else "characters")
        yield chunk
