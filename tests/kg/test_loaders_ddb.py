"""DDB loader: real counts and edges, synonyms, malformed entries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.errors import DataError
from kgwise.kg.loaders import DDB_RELATIONS, ddb_synonyms, load_ddb


def test_real_counts_and_edges(data_dir: Path) -> None:
    g = load_ddb(data_dir / "ddb")
    assert (g.num_nodes, g.num_edges, g.num_relations) == (9_958, 49_974, 15)
    _, rels, _ = g.all_edges()
    counts = dict(zip(g.relations, np.bincount(rels, minlength=g.num_relations).tolist(), strict=True))
    assert counts["may cause"] == 27_412 and counts["may treat"] == 5_451
    simva = g.node("Simvastatin")
    out = {(g.relation_name(r), g.label(t)) for r, t in zip(*(a.tolist() for a in g.out_edges(simva)),
                                                              strict=True)}
    assert ("may treat", "Hyperlipidemia") in out
    assert ("belongs to the drug family of", "Hydroxymethylglutaryl CoA reductase inhibitors") in out
    aedes = g.node("Aedes mosquito")
    assert g.node("Dengue") in g.out_edges(aedes)[1].tolist()
    # edges are stored subject -> object only
    assert aedes not in g.out_edges(g.node("Dengue"))[1].tolist()


def test_synonyms(data_dir: Path) -> None:
    names = json.loads((data_dir / "ddb" / "ddb_names.json").read_text())
    syn = ddb_synonyms(data_dir / "ddb")
    assert len(syn) == len(names) == 17_358
    assert len(set(syn.values())) == 9_958
    g = load_ddb(data_dir / "ddb")
    some_synonym = next(n for n, (_, flag) in names.items() if flag == "0")
    assert some_synonym in g.text(g.node(syn[some_synonym]))


def write(root: Path, names: object, relas: object) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ddb_names.json").write_text(json.dumps(names))
    (root / "ddb_relas.json").write_text(json.dumps(relas))
    return root


NAMES = {"Aspirin": ["1", "1"], "ASA": ["1", "0"], "Pain": ["2", "1"], "Ache": ["2", "0"]}


def test_small_graph(tmp_path: Path) -> None:
    g = load_ddb(write(tmp_path / "d", NAMES, {"0": ["1", "2", "233"]}))
    assert list(g.labels) == ["Aspirin", "Pain"]
    assert [tuple(t) for t in g.triples(*g.all_edges())] == [("Aspirin", DDB_RELATIONS["233"], "Pain")]
    assert g.text(0) == "also: ASA"


@pytest.mark.parametrize(
    ("names", "relas", "bad_file", "message"),
    [
        (NAMES, {"0": ["1", "2", "999"]}, "ddb_relas.json", "unknown relation code"),
        (NAMES, {"0": ["1", "7", "2"]}, "ddb_relas.json", "named ids"),
        (NAMES, {"0": ["1", "2"]}, "ddb_relas.json", "expected"),
        ({**NAMES, "Other": ["3"]}, {}, "ddb_names.json", "Other"),
        ({**NAMES, "Dup": ["1", "1"]}, {}, "ddb_names.json", "two preferred names"),
        ({"Lone": ["9", "0"]}, {}, "ddb_names.json", "no preferred name"),
    ],
)
def test_malformed(tmp_path: Path, names: object, relas: object, bad_file: str, message: str) -> None:
    root = write(tmp_path / "d", names, relas)
    with pytest.raises(DataError, match=message) as err:
        load_ddb(root)
    assert err.value.path == str(root / bad_file) and err.value.line == 1


def test_invalid_json_and_missing(tmp_path: Path) -> None:
    root = write(tmp_path / "d", NAMES, {})
    (root / "ddb_relas.json").write_text('{"0": ["1", "2", "2"],\n "1": [}\n')
    with pytest.raises(DataError, match="invalid JSON") as err:
        load_ddb(root)
    assert err.value.line == 2
    with pytest.raises(DataError, match="not found"):
        load_ddb(tmp_path / "none")
