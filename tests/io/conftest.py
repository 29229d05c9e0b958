"""Shared fixtures for the trace I/O tests."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The folder of real public trace slices (../shared/data/traces); missing is a failure, not a skip."""
    if not SHARED_TRACES.is_dir():
        pytest.fail(f"the shared trace slices are missing: {SHARED_TRACES} (see the project README)")
    return SHARED_TRACES
