"""Subgraph → tensors: the node cap, masks, the block-diagonal batch, and the cache's pack/unpack."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import DataError
from kgwise.kg.csr import CSRGraph
from kgwise.kgm.cache import pack_graphs, unpack_graphs
from kgwise.kgm.features import (
    FeatureConfig,
    NodeTable,
    QuestionGraph,
    collate,
    graph_from_subgraph,
    node_text,
)
from kgwise.types import Choice, Question, Subgraph


class HashEncoderDouble:
    """Test double for MiniLM: a deterministic unit vector per text (from its hash)."""

    dim = 16

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:4], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(-1, self.dim)


def _kg() -> CSRGraph:
    return CSRGraph.from_triples(
        [
            ("dog", "hypernym", "animal"),
            ("cat", "hypernym", "animal"),
            ("dog", "atlocation", "kennel"),
            ("kennel", "partof", "house"),
            ("cat", "atlocation", "house"),
        ],
        texts={"dog": "a domestic canine"},
    )


def _question() -> Question:
    return Question(
        id="q1",
        text="Where does a dog sleep?",
        choices=(Choice("A", "kennel"), Choice("B", "house"), Choice("C", "moon")),
        gold=("A",),
    )


def test_node_text_shows_lemma_and_gloss() -> None:
    kg = CSRGraph.from_triples([("dog.n.01", "hypernym", "canine.n.02")], texts={"dog.n.01": "a pet"})
    assert node_text(kg, kg.node("dog.n.01")) == "dog: a pet"
    assert node_text(kg, kg.node("canine.n.02")) == "canine"
    assert node_text(kg, kg.node("dog.n.01"), max_chars=3) == "dog"


def test_graph_from_subgraph_caps_nodes_grounded_first() -> None:
    kg = _kg()
    ids = {lab: kg.node(lab) for lab in ("dog", "animal", "cat", "kennel", "house")}
    h, r, t = kg.all_edges()
    sub = Subgraph(
        nodes=(ids["animal"], ids["cat"], ids["dog"], ids["kennel"], ids["house"]),
        edges=tuple(zip(h.tolist(), r.tolist(), t.tolist(), strict=True)),
        question_nodes=(ids["dog"],),
        choice_nodes=((ids["kennel"],), (ids["house"],), ()),
    )
    g = graph_from_subgraph(_question(), sub, HashEncoderDouble(), FeatureConfig(max_nodes=4))
    # grounded concepts first (question, then choices), then the extractor's order
    assert g.nodes.tolist() == [ids["dog"], ids["kennel"], ids["house"], ids["animal"]]
    assert g.question_mask.tolist() == [True, False, False, False]
    assert g.choice_mask.tolist() == [[False, True, False, False], [False, False, True, False], [False] * 4]
    kept = set(g.nodes.tolist())
    want = {(h_, r_, t_) for h_, r_, t_ in sub.edges if h_ in kept and t_ in kept}
    got = {(int(g.nodes[a]), int(b), int(g.nodes[c])) for a, b, c in g.edges.tolist()}
    assert got == want and len(want) == 3  # cat's edges dropped with cat
    assert g.label == 0 and g.pair_emb.shape == (3, 16) and g.choice_emb.shape == (3, 16)


def _random_graph(rng: np.random.Generator, qid: str, n: int, m: int, c: int, d: int = 8) -> QuestionGraph:
    edges = (
        np.stack(
            [rng.integers(0, max(n, 1), m), rng.integers(0, 3, m), rng.integers(0, max(n, 1), m)], axis=1
        )
        if n
        else np.zeros((0, 3), np.int64)
    )
    return QuestionGraph(
        qid=qid,
        nodes=rng.choice(50, size=n, replace=False).astype(np.int64),
        edges=edges.astype(np.int64),
        question_mask=rng.random(n) < 0.3,
        choice_mask=rng.random((c, n)) < 0.3,
        question_emb=rng.standard_normal(d).astype(np.float32),
        choice_emb=rng.standard_normal((c, d)).astype(np.float32),
        pair_emb=rng.standard_normal((c, d)).astype(np.float32),
        label=int(rng.integers(0, c)),
    )


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.integers(0, 20), st.integers(2, 5)), min_size=1, max_size=5),
    st.integers(0, 2**31 - 1),
)
def test_collate_is_block_diagonal(shapes: list[tuple[int, int, int]], seed: int) -> None:
    rng = np.random.default_rng(seed)
    graphs = [_random_graph(rng, f"q{i}", n, m if n else 0, c) for i, (n, m, c) in enumerate(shapes)]
    table = NodeTable(np.arange(50), rng.standard_normal((50, 8)))
    b = collate(graphs, table, num_relations=3)
    P = sum(g.num_choices for g in graphs)
    N = sum(len(g.nodes) * g.num_choices for g in graphs)
    assert b.num_pairs == P and b.num_graph_nodes == N
    assert b.max_choices == max(g.num_choices for g in graphs)
    # every edge stays inside one pair's copy (context node N + p belongs to pair p)
    owner = np.concatenate([b.node_pair.numpy(), np.arange(P)])
    assert (owner[b.edge_src.numpy()] == owner[b.edge_dst.numpy()]).all()
    # edge count: both directions of each subgraph edge per copy, and both directions of context edges
    n_ctx = sum(
        int(g.question_mask.sum() + g.choice_mask[c].sum()) for g in graphs for c in range(g.num_choices)
    )
    n_kg = sum(2 * len(g.edges) * g.num_choices for g in graphs)
    assert len(b.edge_src) == n_kg + 2 * n_ctx
    assert int(b.edge_type.numpy().max(initial=0)) < 2 * 3 + 4
    # node features: the right embedding, type and relevance for one pair
    vec = b.node_vectors[b.node_index].numpy()
    pos, pair = 0, 0
    for g in graphs:
        for c in range(g.num_choices):
            n = len(g.nodes)
            np.testing.assert_allclose(vec[pos : pos + n], table.emb[g.nodes], rtol=1e-6)
            np.testing.assert_allclose(
                b.node_relevance[pos : pos + n].numpy(),
                table.emb[g.nodes] @ g.pair_emb[c],
                rtol=1e-5,
                atol=1e-5,
            )
            types = b.node_type[pos : pos + n].numpy()
            assert ((types == 2) | (types == 4)).tolist() == g.choice_mask[c].tolist()
            assert ((types == 1) | (types == 4)).tolist() == g.question_mask.tolist()
            assert (b.node_pair[pos : pos + n].numpy() == pair).all()
            pos, pair = pos + n, pair + 1
    text_only = collate(graphs, None, 3, with_graph=False)
    assert text_only.num_graph_nodes == 0 and text_only.context.shape == (P, 24)
    assert text_only.pair_slot.tolist() == b.pair_slot.tolist()


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10), st.integers(0, 15), st.integers(2, 5)), min_size=1, max_size=4),
    st.integers(0, 2**31 - 1),
)
def test_pack_unpack_round_trip(shapes: list[tuple[int, int, int]], seed: int) -> None:
    rng = np.random.default_rng(seed)
    graphs = [_random_graph(rng, f"q{i}", n, m if n else 0, c) for i, (n, m, c) in enumerate(shapes)]
    back = unpack_graphs(pack_graphs(graphs))
    assert len(back) == len(graphs)
    for a, b in zip(graphs, back, strict=True):
        assert a.qid == b.qid and a.label == b.label
        for name in (
            "nodes",
            "edges",
            "question_mask",
            "choice_mask",
            "question_emb",
            "choice_emb",
            "pair_emb",
        ):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_node_table_rows_and_missing() -> None:
    table = NodeTable([7, 3, 11], np.eye(3, dtype=np.float32))
    assert table.rows(np.array([3, 7, 11])).tolist() == [0, 1, 2]
    np.testing.assert_array_equal(table.emb[table.rows(np.array([7]))], [[1, 0, 0]])
    with pytest.raises(DataError, match="node id 5"):
        table.rows(np.array([3, 5]))
    with pytest.raises(DataError, match="duplicate"):
        NodeTable([1, 1], np.zeros((2, 2)))


def test_bad_graph_is_rejected() -> None:
    rng = np.random.default_rng(0)
    g = _random_graph(rng, "q", 3, 2, 4)
    with pytest.raises(DataError, match="edge endpoint"):
        QuestionGraph(
            "bad",
            g.nodes,
            np.array([[0, 0, 9]]),
            g.question_mask,
            g.choice_mask,
            g.question_emb,
            g.choice_emb,
            g.pair_emb,
            0,
        )
    table = NodeTable(np.arange(50), rng.standard_normal((50, 8)))
    with pytest.raises(DataError, match="relation id"):
        collate([g], table, num_relations=1) if g.edges[:, 1].max() >= 1 else collate(
            [
                QuestionGraph(
                    "q",
                    g.nodes,
                    np.array([[0, 5, 1]]),
                    g.question_mask,
                    g.choice_mask,
                    g.question_emb,
                    g.choice_emb,
                    g.pair_emb,
                    0,
                )
            ],
            table,
            num_relations=1,
        )
