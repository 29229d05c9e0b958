"""The stated bounds of every numeric field, in traces and in contracts (one home).

Why bounds at all: a value that is a valid JSON number can still be out of
any useful range (an integer beyond float range, a 40-digit token cap, a
window of 1e-300 s), and every layer downstream would then fail in its own
way (an `OverflowError`, a numpy cast, an astronomically large window
index). Each field is checked once, where it is read, against the bound
written here, and the error names the field.

Trace records (`rvguard.events.event_from_dict`, every format alike):

=================  ==================================================
``t``              finite, 0 ≤ t ≤ MAX_TIME
``deadline``       finite, t ≤ deadline ≤ MAX_TIME (absolute)
``prompt_tokens``  whole, 0 ≤ n ≤ MAX_TOKENS (``48.0`` reads as 48)
``max_tokens``     whole, 0 ≤ n ≤ MAX_TOKENS
``priority_hint``  finite double (an integer beyond float range is refused)
``rid``            non-empty text of at most MAX_ID_CHARS characters, or an
                   integer with |rid| ≤ MAX_RID_INT
``tenant``         non-empty text of at most MAX_ID_CHARS characters
=================  ==================================================

Contracts (`rvguard.contract.Contract`): ``|epoch| ≤ MAX_TIME``;
``MIN_WINDOW ≤ window ≤ MAX_SPAN``; durations (``deadline``, ceilings,
bound bases) ``≤ MAX_SPAN``; ``per_token ≤ MAX_SPAN``;
``1 ≤ slots ≤ MAX_SLOTS``; ``1 ≤ output_cap ≤ MAX_TOKENS``;
``0 ≤ floor ≤ MAX_FLOOR``; ``0 ≤ tier ≤ MAX_TIER``;
``0 ≤ token weight ≤ MAX_WEIGHT``.

With these, a window index ``(t - epoch) / window`` stays below 2·10¹⁸ and
fits in an int64 column, token counts fit an int32, and ``t + D`` is a
normal float.

Messages show a bad value through `shown` (short, whatever its size) and
text read from a file through `printable` (escaped, whatever it holds).

Structure of the files themselves (`rvguard.untrusted`): JSON and YAML
nesting at most MAX_DEPTH levels, YAML alias expansion at most
MAX_ALIAS_NODES nodes, a contract file at most MAX_SPEC_BYTES bytes, a line of any
line-oriented file (JSONL, CSV, public traces, alert logs) at most MAX_LINE_BYTES: a file
with no newline (a link to ``/dev/zero``) is refused at its first line, in bounded memory.
"""

from __future__ import annotations

import reprlib
import sys

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "MAX_DOUBLE",
    "MAX_FLOOR",
    "MAX_ID_CHARS",
    "MAX_LINE_BYTES",
    "MAX_RID_INT",
    "MAX_SLOTS",
    "MAX_SPAN",
    "MAX_SPEC_BYTES",
    "MAX_TIER",
    "MAX_TIME",
    "MAX_TOKENS",
    "MAX_WEIGHT",
    "MIN_WINDOW",
    "printable",
    "shown",
]

#: Absolute times (trace ``t`` and ``deadline``, contract ``epoch``), seconds: ≈ 31,700 years.
MAX_TIME = 1e12
#: Durations in a contract (window, deadlines, ceilings, bounds), seconds: ≈ 31.7 years.
MAX_SPAN = 1e9
#: The shortest window, seconds: keeps every window index of an admissible time in int64.
MIN_WINDOW = 1e-6
#: Token counts (``prompt_tokens``, ``max_tokens``, ``output_cap``): the int32 maximum.
MAX_TOKENS = 2**31 - 1
#: An integer rid's magnitude: 64 bits (signed or unsigned ids both fit).
MAX_RID_INT = 2**64 - 1
#: Backend slots C.
MAX_SLOTS = 1_000_000
#: A tenant's floor B (requests or token credits per window).
MAX_FLOOR = 1e12
#: A tenant's dispatch tier.
MAX_TIER = 1_000_000
#: A token weight (credits per token).
MAX_WEIGHT = 1e6
#: Nesting of JSON/YAML containers, in a trace record or a contract file.
MAX_DEPTH = 64
#: Nodes a YAML document may expand to through aliases (a contract has a few dozen).
MAX_ALIAS_NODES = 10_000
#: Size of a contract file, bytes.
MAX_SPEC_BYTES = 1_000_000
#: A line of a line-oriented file (a trace record, a CSV row, an alert), bytes (text: characters).
MAX_LINE_BYTES = 1 << 20
#: An id read from a file (``rid``, ``tenant``), characters: ids are keys held for a whole check.
MAX_ID_CHARS = 1024
#: Largest finite double, the bound of ``priority_hint``.
MAX_DOUBLE = sys.float_info.max

_LOG10_2 = 0.30103
_SHOWN = 100
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple = 3, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 60, 60, 40


def shown(value: object) -> str:
    """``repr(value)`` kept short, for error messages: a bad value may be huge or deeply nested."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * _LOG10_2) + 1} digits"
    text = _REPR.repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def printable(text: str) -> str:
    """``text`` with every non-printable character (and ``\\``) escaped; printable text unchanged.

    For text read from a file and shown on a terminal (rids, reasons, field
    paths): a control character, a line separator or a lone surrogate becomes
    an escape (``\\x1b``, ``\\n``, ``\\ud800``), so the text can neither move
    the cursor, colour the terminal nor print a line of its own.
    """
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(c) for c in text)


def _escape(c: str) -> str:
    if c == "\\":
        return "\\\\"
    if c.isprintable() or c == " ":
        return c
    return c.encode("unicode_escape", "backslashreplace").decode("ascii")
