"""Shared fixtures for the trace I/O tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.data import TRACES


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The folder of real public trace slices rvguard ships (rvguard/data/traces)."""
    return TRACES
