"""Extractors by name: the built-in two, a new one as one registration, and the errors."""

from __future__ import annotations

import pytest

from kgwise.errors import ConfigError
from kgwise.extract import (
    EXTRACTORS,
    ExtractorOptions,
    SubgraphExtractor,
    make_extractor,
    register_extractor,
    registry,
)
from kgwise.kg import CSRGraph, KnowledgeGraph
from kgwise.kg.grounding import Grounding
from kgwise.types import Question, Subgraph


class StubSeedsExtractor:
    """Returns the grounded concepts alone (a stand-in strategy for the registry's unit test)."""

    def __init__(self, kg: KnowledgeGraph) -> None:
        self.kg = kg

    def extract(self, question: Question, grounding: Grounding) -> Subgraph:
        return Subgraph(nodes=grounding.question_nodes, question_nodes=grounding.question_nodes)


def test_built_in_extractors_and_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    kg = CSRGraph.from_triples([("a", "r", "b")])
    assert list(EXTRACTORS)[:2] == ["P_sub", "P_RL"]
    assert isinstance(make_extractor("P_sub", kg), SubgraphExtractor)
    with pytest.raises(ConfigError, match="P_RL needs a trained policy"):
        make_extractor("P_RL", kg, ExtractorOptions())
    with pytest.raises(ConfigError, match="unknown extractor 'P_x'; choose one of P_sub, P_RL"):
        make_extractor("P_x", kg)
    monkeypatch.setattr(registry, "EXTRACTORS", dict(EXTRACTORS))
    register_extractor("seeds", lambda graph, options: StubSeedsExtractor(graph))
    got = make_extractor("seeds", kg).extract(Question("q", "a?"), Grounding((0,), ((1,),)))
    assert got.nodes == (0,)
    for bad in ("seeds", "", "a+b"):
        with pytest.raises(ConfigError, match="registered twice"):
            register_extractor(bad, lambda graph, options: StubSeedsExtractor(graph))
    assert "seeds" not in EXTRACTORS
