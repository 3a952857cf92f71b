"""The GNN maths: scatter softmax, batching independence, choice masking, save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError, DataError
from kgwise.kgm.features import NodeTable, QuestionGraph, collate
from kgwise.kgm.io import config_path, load_model, save_model
from kgwise.kgm.model import GraphQA, ModelConfig, TextQA, build_model, scatter_softmax


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30), st.integers(0, 2**31 - 1))
def test_scatter_softmax_matches_per_group_softmax(groups: list[int], seed: int) -> None:
    g = torch.tensor(groups)
    scores = torch.from_numpy(np.random.default_rng(seed).normal(0, 5, (len(groups), 2)))
    out = scatter_softmax(scores, g, 6)
    for k in set(groups):
        sel = g == k
        torch.testing.assert_close(out[sel], torch.softmax(scores[sel], dim=0))


def _graph(rng: np.random.Generator, qid: str, n: int, c: int, d: int = 384) -> QuestionGraph:
    m = 2 * n
    return QuestionGraph(
        qid=qid,
        nodes=np.sort(rng.choice(40, size=n, replace=False)).astype(np.int64),
        edges=np.stack([rng.integers(0, n, m), rng.integers(0, 3, m), rng.integers(0, n, m)], 1).astype(
            np.int64
        ),
        question_mask=rng.random(n) < 0.3,
        choice_mask=rng.random((c, n)) < 0.3,
        question_emb=rng.standard_normal(d).astype(np.float32),
        choice_emb=rng.standard_normal((c, d)).astype(np.float32),
        pair_emb=rng.standard_normal((c, d)).astype(np.float32),
        label=0,
    )


@pytest.mark.parametrize("kind", ["graph", "text"])
def test_batching_does_not_mix_questions(kind: str) -> None:
    rng = np.random.default_rng(1)
    torch.manual_seed(0)
    graphs = [_graph(rng, "a", 7, 5), _graph(rng, "b", 4, 4), _graph(rng, "c", 9, 5)]
    table = NodeTable(np.arange(40), rng.standard_normal((40, 384)))
    model = build_model(ModelConfig(kind=kind, num_relations=3)).eval()  # type: ignore[arg-type]
    with torch.no_grad():
        together = model(collate(graphs, table, 3, with_graph=kind == "graph"))
        for i, g in enumerate(graphs):
            alone = model(collate([g], table, 3, with_graph=kind == "graph"))
            torch.testing.assert_close(together[i, : g.num_choices], alone[0], rtol=1e-4, atol=1e-5)
    assert torch.isinf(together[1, 4]) and together[1, 4] < 0  # question b has 4 choices
    assert torch.softmax(together, -1)[1, 4] == 0


def test_graph_changes_the_score() -> None:
    """The graph model reads the graph: changing the subgraph's edges changes its scores."""
    rng = np.random.default_rng(2)
    torch.manual_seed(0)
    g = _graph(rng, "a", 8, 5)
    table = NodeTable(np.arange(40), rng.standard_normal((40, 384)))
    model = GraphQA(ModelConfig(num_relations=3)).eval()
    h = QuestionGraph(
        g.qid,
        g.nodes,
        g.edges[:2],
        g.question_mask,
        g.choice_mask,
        g.question_emb,
        g.choice_emb,
        g.pair_emb,
        0,
    )
    with torch.no_grad():
        assert not torch.allclose(model(collate([g], table, 3)), model(collate([h], table, 3)))


def test_save_load_identical(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    graphs = [_graph(rng, "a", 6, 5), _graph(rng, "b", 5, 5)]
    table = NodeTable(np.arange(40), rng.standard_normal((40, 384)))
    for model in (GraphQA(ModelConfig(num_relations=3, gnn_hidden=32)), TextQA(ModelConfig(kind="text"))):
        model.eval()
        path = tmp_path / f"{model.config.kind}.pt"
        save_model(path, model, {"note": "x"})
        again, meta = load_model(path)
        assert meta["note"] == "x" and again.config == model.config
        wg = model.config.kind == "graph"
        with torch.no_grad():
            torch.testing.assert_close(
                model(collate(graphs, table, 3, wg)), again(collate(graphs, table, 3, wg)), rtol=0, atol=0
            )


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        load_model(tmp_path / "none.pt")
    path = tmp_path / "m.pt"
    save_model(path, TextQA(ModelConfig(kind="text")), {})
    config_path(path).write_text('{"format": "other"}')
    with pytest.raises(DataError, match="kgwise-kgm"):
        load_model(path)


def test_bad_model_config() -> None:
    with pytest.raises(ConfigError):
        ModelConfig(kind="tree")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ModelConfig(gnn_hidden=30, heads=4)
