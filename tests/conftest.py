"""Shared fixtures: contracts from specs/, the shared real-trace folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from rvguard.contract import Contract, load_contract

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
SHARED_TRACES = ROOT.parent / "shared" / "data" / "traces"


@pytest.fixture
def marquee() -> Contract:
    return load_contract(SPECS / "marquee.yaml")


@pytest.fixture
def two_tenants() -> Contract:
    return load_contract(SPECS / "two_tenants.yaml")
