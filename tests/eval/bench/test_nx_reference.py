"""The networkx baseline and the numpy P_sub agree on a real graph (DDB) and real questions (MedQA)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.datasets import load
from kgwise.eval.bench.nx_reference import NxSubgraphExtractor, to_networkx
from kgwise.extract import SubgraphConfig, SubgraphExtractor
from kgwise.kg.grounding import Grounder, GrounderConfig
from kgwise.kg.loaders import load_ddb


@pytest.mark.parametrize("cfg", [SubgraphConfig(), SubgraphConfig(max_nodes=40, max_expand=8, hops=3)])
def test_same_output_on_ddb_medqa(data_dir: Path, cfg: SubgraphConfig) -> None:
    graph = load_ddb(data_dir / "ddb")
    grounder = Grounder(graph, GrounderConfig(wordnet_dir=data_dir / "wordnet"))
    ours = SubgraphExtractor(graph, cfg)
    theirs = NxSubgraphExtractor(to_networkx(graph), cfg)
    questions = load("medqa", "test", data_dir)[:40]
    with_paths = 0
    for q in questions:
        g = grounder.ground(q)
        sg = ours.extract(q, g)
        assert theirs.extract(q, g) == sg, q.id
        with_paths += bool(sg.paths)
    assert with_paths > 0  # the comparison covers paths, not only empty subgraphs
