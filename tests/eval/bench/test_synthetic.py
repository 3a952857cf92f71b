from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kgwise.errors import DataError
from kgwise.eval.bench.synthetic import RELATIONS, SyntheticConfig, synthetic_conceptnet, wordnet_words

WORDS = [f"word{i}" for i in range(300)]


def test_shape_and_determinism() -> None:
    cfg = SyntheticConfig(num_nodes=5_000, num_edges=12_000, seed=3)
    g = synthetic_conceptnet(WORDS, cfg)
    assert (g.num_nodes, g.num_edges, g.num_relations) == (5_000, 12_000, 17)
    assert list(g.relations) == list(RELATIONS)
    assert len(set(g.labels)) == g.num_nodes
    assert g.labels[:300] == WORDS
    deg = g.degree(np.arange(g.num_nodes))
    assert deg.min() >= 1  # no isolated nodes
    assert deg.max() > 50 * np.median(deg)  # heavy tail: hubs
    h, r, t = g.all_edges()
    assert not np.any(h == t)
    assert np.bincount(r, minlength=17).argmax() == 0  # relatedto is the commonest
    again = synthetic_conceptnet(WORDS, cfg)
    assert all(np.array_equal(a, b) for a, b in zip(g.all_edges(), again.all_edges(), strict=True))
    other = synthetic_conceptnet(WORDS, SyntheticConfig(num_nodes=5_000, num_edges=12_000, seed=4))
    assert not np.array_equal(g.all_edges()[2], other.all_edges()[2])


def test_bad_sizes() -> None:
    with pytest.raises(ValueError, match="num_edges"):
        synthetic_conceptnet(WORDS, SyntheticConfig(num_nodes=100, num_edges=50))
    with pytest.raises(ValueError, match="compounds"):
        synthetic_conceptnet(WORDS[:3], SyntheticConfig(num_nodes=100, num_edges=200))


def test_wordnet_words(data_dir: Path, tmp_path: Path) -> None:
    words = wordnet_words(data_dir / "wordnet")
    assert len(words) > 140_000 and len(set(words)) == len(words)
    assert {"run", "take", "make", "go"} <= set(words[:50])
    with pytest.raises(DataError, match="index"):
        wordnet_words(tmp_path)
