"""REINFORCE training of P_RL, and the trained agent's extraction, on real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.extract.path_agent import NodeEmbeddings, PathAgent, PathAgentConfig, train_path_policy
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder, Grounding
from kgwise.types import Choice, Question


def _items(kg: CSRGraph, qs: tuple[Question, ...]) -> list[tuple[Question, Grounding]]:
    g = Grounder(kg)
    return [(q, g.ground(q)) for q in qs]


def test_training_needs_a_reachable_choice(encoder: MiniLM) -> None:
    kg = CSRGraph.from_arrays(["aspirin", "pain", "insulin", "diabetes"], ["treats"], [0, 2], [0, 0], [1, 3])
    q = Question("q1", "does aspirin help?", choices=(Choice("A", "diabetes"),))
    with pytest.raises(ConfigError, match="no training question has a choice concept within max_steps = 3"):
        train_path_policy(kg, [(q, Grounding((0,), ((3,),)))], iterations=2, progress=False,
                          embeddings=NodeEmbeddings(kg, encoder, cache=False))


@pytest.mark.slow
def test_agent_learns_to_reach_targets_on_a_small_real_subgraph(
    small: tuple[CSRGraph, tuple[Question, ...]], encoder: MiniLM, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    kg, qs = small
    items = _items(kg, qs)
    cfg = PathAgentConfig(batch_walks=32, seed=1)
    emb = NodeEmbeddings(kg, encoder, cache=False)
    policy, log = train_path_policy(kg, items, cfg, embeddings=emb, iterations=70, progress=False,
                                    checkpoint=tmp_path / "ckpt.pt")
    first, last = np.mean(log.reach_rate[:15]), np.mean(log.reach_rate[-15:])
    assert last > first + 0.5, (first, last)
    # the trained agent extracts paths that start at a question concept and end at a choice concept
    agent = PathAgent(kg, policy, cfg, embeddings=emb)
    found = 0
    for q, g in items:
        sub = agent.extract(q, g)
        for p in sub.paths:
            found += 1
            assert p.nodes[0] in g.question_nodes
            assert any(p.nodes[-1] in c for c in g.choice_nodes)
            assert 1 <= len(p) <= cfg.max_steps
            for h, r, t in p.edges():
                rels, tails = kg.out_edges(h)
                assert any(int(a) == r and int(b) == t for a, b in zip(rels, tails, strict=True))
        assert set(sub.edges) == {e for p in sub.paths for e in p.edges()}
    assert found > 0
    # resuming from the finished checkpoint trains no further and keeps the log
    _, log2 = train_path_policy(kg, items, cfg, embeddings=emb, iterations=70, progress=False,
                                checkpoint=tmp_path / "ckpt.pt")
    assert log2.reach_rate == log.reach_rate
    # a saved policy loads into an agent that extracts the same subgraph
    policy.save(tmp_path / "policy.pt", cfg)
    again = PathAgent.load(kg, tmp_path / "policy.pt", encoder)
    q, g = items[0]
    assert again.extract(q, g) == agent.extract(q, g)
