from __future__ import annotations

from pathlib import Path

import numpy as np

from kgwise.embed import Encoder, MiniLM, cosine_distance


def test_minilm_embeds_offline_and_caches(tmp_path: Path) -> None:
    enc = MiniLM(cache=tmp_path / "emb.sqlite")
    assert isinstance(enc, Encoder)
    texts = ["a dog is an animal", "a puppy is a young dog", "the stock market fell", "a dog is an animal"]
    v = enc.encode(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(v[0], v[3])
    d = cosine_distance(v[[0, 0]], v[[1, 2]])
    assert d[0] < d[1]  # dog/puppy closer than dog/stock market
    again = MiniLM(cache=tmp_path / "emb.sqlite")  # a fresh encoder reads the disk cache, no model load
    np.testing.assert_allclose(again.encode(texts[:2]), v[:2], atol=1e-6)
    assert again._model is None
