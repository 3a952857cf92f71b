"""Shared fixtures: the real data directory beside the project (``../shared/data``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgwise.conformal.grid import TableBatch

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("KGWISE_DATA") or ROOT.parent / "shared" / "data")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real shared data; the suite fails loudly (not skips) when it is missing."""
    assert DATA.is_dir(), f"shared data not found at {DATA}; set KGWISE_DATA"
    return DATA


@pytest.fixture(scope="session")
def webqsp_uag_tables(data_dir: Path) -> TableBatch:
    """UAG tables of the first 300 aligned WebQSP questions over the Freebase fragment, with RoG's recorded
    generations (built once per cache: a cold build encodes every retrieved relation path)."""
    from kgwise.conformal.experiment import ExperimentConfig, load_webqsp_data, webqsp_tables

    cfg = ExperimentConfig(limit=300)
    return webqsp_tables(data_dir, cfg, load_webqsp_data(data_dir, cfg.gnn, cfg.limit), progress=False)
