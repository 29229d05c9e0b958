"""rvguard: a trusted floor under an untrusted learner in LLM serving."""

from __future__ import annotations

__version__ = "0.1.0"
