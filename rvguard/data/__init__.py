"""Files shipped with rvguard, found the same way in a checkout and in an installed wheel.

* ``traces/``: the public arrival-trace slices the tests, examples and the ``trace-replay``
  experiment use (Azure LLM inference 2023, CC BY 4.0; Mooncake FAST'25, Apache-2.0), with their
  provenance and attribution in ``traces/README.md`` and the top-level ``NOTICE``;
* ``specs/``: the example contracts and the trace JSON Schema (the repository's ``specs/``);
* ``proofs/``: the proof scripts ``verify`` refers to (the repository's ``proofs/``), runnable as
  ``python -m rvguard.data.proofs.backlog_lemma``.

In a checkout ``specs`` and ``proofs`` are symlinks to the top-level folders: one copy.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PROOFS", "SPECS", "TRACES"]

_HERE = Path(__file__).resolve().parent
TRACES = _HERE / "traces"
SPECS = _HERE / "specs"
PROOFS = _HERE / "proofs"
