"""The one dataset → KG map (``kgwise.kg.benchmarks``) on the real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.conformal.provenance import graph_fingerprint
from kgwise.errors import ConfigError
from kgwise.kg.benchmarks import DATASET_KGS, KGSpec, benchmark_kg, build_kg
from kgwise.kg.loaders import load_ddb


def test_specs_validate_and_round_trip() -> None:
    for spec in DATASET_KGS.values():
        assert KGSpec.from_dict(spec.to_dict()) == spec
    assert {DATASET_KGS[d].wordnet_senses for d in ("obqa", "csqa")} == {"frequent"}
    # a spec saved before wordnet_senses existed (a trained KG model's) keeps the graph it was trained on
    legacy = KGSpec.from_dict({"wordnet": "wordnet", "conceptnet_slices": [], "merge_file": "m.txt"})
    assert legacy.wordnet_senses == "all" and legacy.key() != KGSpec("wordnet", (), "m.txt").key()
    with pytest.raises(ConfigError, match="names no graph"):
        KGSpec(wordnet="")
    with pytest.raises(ConfigError, match="stands alone"):
        KGSpec(ddb="ddb")
    with pytest.raises(ConfigError, match="wordnet_senses"):
        KGSpec(wordnet_senses="rare")
    with pytest.raises(ConfigError, match=r"'webqsp'.*csqa, obqa, medqa"):
        benchmark_kg("webqsp")


def test_medqa_is_the_ddb_graph(data_dir: Path) -> None:
    assert graph_fingerprint(benchmark_kg("medqa", data_dir)) == graph_fingerprint(load_ddb(data_dir / "ddb"))


@pytest.mark.slow
def test_wordnet_keeps_only_frequent_senses(data_dir: Path) -> None:
    frequent = benchmark_kg("obqa", data_dir)
    every = build_kg(KGSpec(wordnet="wordnet", wordnet_senses="all"), data_dir)
    assert frequent.num_nodes == every.num_nodes and frequent.num_edges < every.num_edges


def test_a_users_graph_file_as_a_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``KGSpec.of_file``: the user's graph file (absolute), built with no data directory; the benchmarks'
    keys are those of before the field existed (their caches and saved models stay valid)."""
    monkeypatch.delenv("KGWISE_DATA", raising=False)
    tsv = tmp_path / "kg.tsv"
    tsv.write_text("gout\ttreated_by\tcolchicine\ncolchicine\tdrug_class\tanti-inflammatory\n",
                   encoding="utf-8")
    spec = KGSpec.of_file(tsv)
    assert not spec.needs_data and KGSpec.from_dict(spec.to_dict()) == spec
    g = build_kg(spec, use_cache=False)
    assert (g.num_nodes, g.num_edges) == (3, 2)
    assert "graph_file" not in DATASET_KGS["obqa"].to_dict()
    assert DATASET_KGS["medqa"].key() == KGSpec(wordnet="", merge_file="", ddb="ddb").key()
    with pytest.raises(ConfigError, match="a graph file stands alone"):
        KGSpec(graph_file=str(tsv))  # wordnet is the default
    with pytest.raises(ConfigError, match="does not exist"):
        build_kg(KGSpec.of_file(tmp_path / "none.tsv"), use_cache=False)
