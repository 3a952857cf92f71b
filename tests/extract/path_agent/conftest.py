"""Shared fixtures of the P_RL tests: a small real graph (MedQA concepts in DDB) and the sentence encoder."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from kgwise.embed import MiniLM
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder
from kgwise.types import Question


@cache
def _small_real_graph(data: Path) -> tuple[CSRGraph, tuple[Question, ...]]:
    """The union of the P_sub subgraphs of 30 real MedQA questions in the DDB graph, as its own graph."""
    from kgwise.datasets import load
    from kgwise.extract import SubgraphConfig, SubgraphExtractor
    from kgwise.kg.loaders import load_ddb

    kg = load_ddb(data / "ddb")
    qs = load("medqa", "test", data)[:30]
    grounder = Grounder(kg)
    psub = SubgraphExtractor(kg, SubgraphConfig(max_nodes=60))
    nodes: set[int] = set()
    for q in qs:
        nodes.update(psub.extract(q, grounder.ground(q)).nodes)
    keep = np.array(sorted(nodes))
    h, r, t = kg.edges_among(keep)
    new_id = {int(v): i for i, v in enumerate(keep.tolist())}
    heads = [new_id[int(x)] for x in h]
    tails = [new_id[int(x)] for x in t]
    small = CSRGraph.from_arrays([kg.label(int(v)) for v in keep], list(kg.relations), heads, r, tails,
                                 name="ddb-small")
    return small, tuple(qs)


@pytest.fixture(scope="module")
def small(data_dir: Path) -> tuple[CSRGraph, tuple[Question, ...]]:
    return _small_real_graph(data_dir)


@pytest.fixture(scope="module")
def encoder() -> MiniLM:
    return MiniLM()
