"""The grounding benchmark's kept stores: a store is reused only when a complete load from the same graph
marked it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgwise.errors import KgwiseError
from kgwise.eval.bench.grounding import STORE_MARK, _loaded_store


def test_a_kept_store_is_reused_only_after_a_complete_load_of_the_same_graph(tmp_path: Path) -> None:
    db = tmp_path / "virtuoso-g"
    assert _loaded_store(db, "sha256:aa") is None  # nothing there
    db.mkdir()
    (db / "virtuoso.db").write_bytes(b"half a load")
    assert _loaded_store(db, "sha256:aa") is None  # no mark: the load did not finish
    (db / STORE_MARK).write_text(json.dumps({"content_hash": "sha256:aa", "load_s": 49.5}), encoding="utf-8")
    assert _loaded_store(db, "sha256:aa") == 49.5
    assert _loaded_store(db, "sha256:bb") is None  # loaded from another graph
    (db / STORE_MARK).write_text("{not json", encoding="utf-8")
    with pytest.raises(KgwiseError, match=STORE_MARK):
        _loaded_store(db, "sha256:aa")
