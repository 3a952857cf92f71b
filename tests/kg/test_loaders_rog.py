"""RoG's KGQA format: real WebQSP questions and Freebase-fragment subgraphs written in the release's schema
(Parquet shards and JSON Lines), read back as one graph."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kgwise.datasets import load
from kgwise.errors import DataError
from kgwise.kg import CSRGraph
from kgwise.kg.loaders import load_graph, load_tsv, open_graph_file
from kgwise.kg.loaders.rog import is_rog_source, load_rog_graph
from kgwise.types import Question


@pytest.fixture(scope="module")
def fragment(data_dir: Path) -> CSRGraph:
    return load_tsv(data_dir / "webqsp" / "freebase_fragment.tsv")


@pytest.fixture(scope="module")
def questions(data_dir: Path) -> list[Question]:
    return load("webqsp", "test", data_dir)[:40]


def label_triples(g: CSRGraph) -> set[tuple[str, str, str]]:
    return {(t.head, t.relation, t.tail) for t in g.triples(*g.all_edges())}


def test_parquet_and_jsonl_read_back_the_union_graph(
    rog_writer: Callable[..., Path], fragment: CSRGraph, questions: list[Question], tmp_path: Path
) -> None:
    shards = rog_writer(questions, fragment, tmp_path / "data")
    rog_writer(questions[:5], fragment, tmp_path / "data", split="train", shards=1)
    lines = rog_writer(questions, fragment, tmp_path / "jsonl", jsonl=True)
    assert is_rog_source(shards) and is_rog_source(lines) and not is_rog_source(tmp_path / "nothing.jsonl")

    graph = load_rog_graph(shards, split="test")
    want = set()
    for q in questions:
        one = load_rog_graph(rog_writer([q], fragment, tmp_path / "one" / q.id, shards=1))
        want |= label_triples(one)
    assert label_triples(graph) == want and graph.num_edges == len(want) > 1_000
    assert label_triples(graph) <= label_triples(fragment)
    assert label_triples(load_graph(lines, "rog")) == want
    assert label_triples(open_graph_file(lines)) == want  # JSON Lines with RoG's fields
    assert label_triples(open_graph_file(shards / sorted(p.name for p in shards.glob("test-*"))[0])) < want


def test_bad_rog_data_is_named(rog_writer: Callable[..., Path], fragment: CSRGraph,
                               questions: list[Question], tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no 'test-\*\.parquet' shards"):
        load_rog_graph(tmp_path, split="test")
    with pytest.raises(DataError, match="not found"):
        load_rog_graph(tmp_path / "missing.parquet")

    no_graph = tmp_path / "q.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "a", "question": "who?"}]), no_graph)
    with pytest.raises(DataError, match=r"q\.parquet: not RoG data: no column\(s\) graph"):
        load_rog_graph(no_graph)

    bad = tmp_path / "bad.jsonl"
    row = {"id": "q1", "question": "who?", "answer": ["x"], "q_entity": ["Jamaica"], "a_entity": [],
           "graph": [["Jamaica", "r", "x"], ["Jamaica", "r"]]}
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl: row 1: graph triple 1 is not \[head, relation, tail\]"):
        load_rog_graph(bad)
    bad.write_text(json.dumps(row | {"graph": []}) + "\n")
    with pytest.raises(DataError, match="no graph triples"):
        load_rog_graph(bad)
    bad.write_text(json.dumps(row) + "\nnot json\n")
    with pytest.raises(DataError, match=r"bad\.jsonl:2: invalid JSON"):
        load_rog_graph(bad)

    shard = tmp_path / "bad.parquet"
    good = row | {"graph": [["Jamaica", "r", "x"]]}
    pq.write_table(pa.Table.from_pylist([good, good | {"graph": [["Jamaica", "r", "x"], ["a", " ", "b"]]}]),
                   shard)
    with pytest.raises(DataError, match=r"bad\.parquet: row 2: graph triple 1 is not"):
        load_rog_graph(shard)
    pq.write_table(pa.Table.from_pylist([good | {"graph": ["Jamaica", "r", "x"]}]), shard)
    with pytest.raises(DataError, match=r"bad\.parquet: row 1: graph triple 0 is not"):
        load_rog_graph(shard)

    text = tmp_path / "junk.parquet"
    text.write_text("not parquet")
    with pytest.raises(DataError, match=r"junk\.parquet: cannot read Parquet"):
        load_rog_graph(text)
