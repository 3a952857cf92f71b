"""Shared fixtures: the real data directory beside the project (``../shared/data``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("KGWISE_DATA") or ROOT.parent / "shared" / "data")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real shared data; the suite fails loudly (not skips) when it is missing."""
    assert DATA.is_dir(), f"shared data not found at {DATA}; set KGWISE_DATA"
    return DATA
