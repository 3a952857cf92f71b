"""A calibration's record of its pipeline, and the check of new answers against it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kgwise.conformal.provenance import check_same_pipeline, graph_fingerprint
from kgwise.errors import ConfigError
from kgwise.kg import CSRGraph
from kgwise.kg.loaders import load_ddb
from kgwise.kg.sparql import SPARQLGraph


def test_a_graph_is_known_by_its_content_not_its_file(data_dir: Path, tmp_path: Path) -> None:
    """The real DDB graph: loaded again from a copy, or saved and reopened, it is the same graph; without
    one edge it is another."""
    ddb = load_ddb(data_dir / "ddb")
    shutil.copytree(data_dir / "ddb", tmp_path / "ddb")
    fingerprint = graph_fingerprint(ddb)
    assert graph_fingerprint(load_ddb(tmp_path / "ddb")) == fingerprint
    assert graph_fingerprint(CSRGraph.load(ddb.save(tmp_path / "ddb.npz"))) == fingerprint
    h, r, t = ddb.all_edges()
    triples = [(ddb.label(a), ddb.relation_name(b), ddb.label(c)) for a, b, c in zip(h, r, t, strict=True)]
    assert graph_fingerprint(CSRGraph.from_triples(triples[1:])) != fingerprint
    assert graph_fingerprint(SPARQLGraph("http://127.0.0.1:9/sparql")) == "sparql:http://127.0.0.1:9/sparql"


def test_differences_are_refused_unless_allowed() -> None:
    made = {"kg": "sha1:1", "llm": "smollm2-135m", "policy": None}
    assert check_same_pipeline(made, dict(made), "cal.json", allow_mismatch=False) == []
    now = {**made, "llm": "gemma3-270m"}
    with pytest.raises(ConfigError, match=r"cal.json was calibrated on another pipeline.*llm: "
                       r"calibrated with 'smollm2-135m', answering with 'gemma3-270m'.*--allow-mismatch"):
        check_same_pipeline(made, now, "cal.json", allow_mismatch=False)
    assert check_same_pipeline(made, now, "cal.json", allow_mismatch=True) == [
        "llm: calibrated with 'smollm2-135m', answering with 'gemma3-270m'"]
    assert check_same_pipeline(None, now, "cal.json", allow_mismatch=True) == [
        "the calibration does not record what it was made with (an older file)"]
