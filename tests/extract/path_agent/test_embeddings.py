"""P_RL's node embeddings: verbalised triples, encoded lazily, kept in a cache file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kgwise.embed import MiniLM
from kgwise.extract.path_agent import NodeEmbeddings
from kgwise.kg import CSRGraph


def test_nodes_are_verbalised_encoded_once_and_cached(encoder: MiniLM, tmp_path: Path) -> None:
    kg = CSRGraph.from_triples([("aspirin", "treats", "pain"), ("aspirin", "is_a", "drug"),
                                ("ibuprofen", "treats", "pain")], name="tiny")
    emb = NodeEmbeddings(kg, encoder, text_edges=2, cache=tmp_path / "emb.npz")
    pain = kg.node("pain")
    assert emb.verbalise(kg.node("aspirin")).startswith("aspirin. ")
    assert emb.verbalise(pain).count(". ") == 2  # no out-edges: its first two in-edges
    vecs = emb.get([pain, kg.node("aspirin"), pain])
    assert vecs.shape == (3, encoder.dim) and emb.encoded == 2
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(vecs[0], vecs[2])
    emb.save()
    again = NodeEmbeddings(kg, encoder, text_edges=2, cache=tmp_path / "emb.npz")
    assert again.encoded == 2
    np.testing.assert_allclose(again.get([pain])[0], vecs[0], atol=1e-6)
