"""``kgwise kg subgraph`` and ``kgwise bench kg``: smoke tests through the real command line app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.kg import CSRGraph

runner = CliRunner()


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    g = CSRGraph.from_triples([
        ("dog", "isa", "animal"), ("animal", "atlocation", "zoo"), ("dog", "atlocation", "house"),
        ("house", "partof", "town"), ("cat", "isa", "animal"),
    ])
    return g.save(tmp_path / "toy.npz")


def test_kg_subgraph_prints_concepts_triples_and_paths(graph_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "sg.json"
    result = runner.invoke(app, ["kg", "subgraph", str(graph_file), "--question", "Where do dogs live?",
                                 "--choices", "a zoo|the house|space", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "question concepts: dog" in result.output
    assert "choice A a zoo: zoo" in result.output and "choice C space: (none)" in result.output
    assert "(dog, isa, animal)" in result.output
    assert "dog -[isa]-> animal -[atlocation]-> zoo" in result.output
    report = json.loads(out.read_text())
    assert report["choice_concepts"] == [["zoo"], ["house"], []]
    assert {"head": "dog", "relation": "atlocation", "tail": "house"} in report["triples"]
    assert "dog -[isa]-> animal -[atlocation]-> zoo" in report["rendered_paths"]
    assert {"nodes": ["dog", "animal", "zoo"], "relations": ["isa", "atlocation"],
            "inverse": [False, False]} in report["paths"]


def test_kg_subgraph_and_stats_read_a_triple_file_like_the_built_graph(graph_file: Path, tmp_path: Path
                                                                         ) -> None:
    tsv = tmp_path / "toy.tsv"
    g = CSRGraph.load(graph_file)
    tsv.write_text("".join("\t".join(t) + "\n" for t in g.triples(*g.all_edges())))
    args = ["--question", "Where do dogs live?", "--choices", "a zoo|the house|space"]
    from_npz = runner.invoke(app, ["kg", "subgraph", str(graph_file), *args])
    from_tsv = runner.invoke(app, ["kg", "subgraph", str(tsv), *args])
    assert from_tsv.exit_code == 0, from_tsv.output
    assert from_tsv.output == from_npz.output
    result = runner.invoke(app, ["kg", "stats", str(tsv)])
    assert result.exit_code == 0 and "6 nodes, 5 edges, 3 relations" in result.output, result.output


def test_kg_subgraph_bad_input(graph_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["kg", "subgraph", str(graph_file), "--question", "  "])
    assert result.exit_code == 2 and "empty question" in result.output
    result = runner.invoke(app, ["kg", "subgraph", str(tmp_path / "missing.npz"), "--question", "dog?"])
    assert result.exit_code == 2 and "not found" in result.output
    result = runner.invoke(app, ["kg", "subgraph", str(graph_file), "--question", "dog?", "--hops", "0"])
    assert result.exit_code == 2 and "hops" in result.output


def test_bench_kg_on_ddb(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = runner.invoke(app, ["bench", "kg", "--data", str(data_dir), "--graphs", "ddb", "--limit", "5",
                                 "--json", str(out)])
    assert result.exit_code == 0, result.output
    ddb = json.loads(out.read_text())["ddb"]
    assert ddb["nodes"] == 9_958 and ddb["edges"] == 49_974
    assert ddb["questions"] == 5 and ddb["nx_questions"] == 5
    assert ddb["identical_outputs"] == 5
    for key in ("build_s", "cached_load_s", "peak_rss_mb", "psub_median_ms", "psub_p95_ms", "networkx_ratio"):
        assert ddb[key] > 0
    assert out.with_suffix(".png").is_file()
    result = runner.invoke(app, ["bench", "kg", "--data", str(data_dir), "--graphs", "nope"])
    assert result.exit_code == 2 and "unknown graph" in result.output
