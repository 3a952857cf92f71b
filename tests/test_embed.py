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


def test_concurrent_first_requests_load_one_model(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    enc = MiniLM(cache=False)
    loads = []
    real = MiniLM._load

    def counting(self: MiniLM) -> object:
        model = real(self)
        loads.append(id(model))
        return model

    MiniLM._load = counting  # type: ignore[method-assign]
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: enc.encode([f"question {i}"]), range(8)))
    finally:
        MiniLM._load = real  # type: ignore[method-assign]
    assert len(loads) == 8 and len(set(loads)) == 1  # eight encodes, one model


def test_memo_and_disk_cache_are_bounded(tmp_path: Path) -> None:
    import sqlite3

    enc = MiniLM(cache=tmp_path / "emb.sqlite", memory_max=5, cache_max_rows=20)
    texts = [f"text number {i}" for i in range(30)]
    v = enc.encode(texts)  # more texts than the memo holds: every row still comes back
    assert v.shape == (30, 384) and len(enc._memory) == 5
    np.testing.assert_allclose(enc.encode(texts[-1:])[0], v[-1], atol=1e-6)
    rows = sqlite3.connect(tmp_path / "emb.sqlite").execute("SELECT count(*) FROM vec").fetchone()[0]
    assert rows <= 20
    again = MiniLM(cache=tmp_path / "emb.sqlite")
    np.testing.assert_allclose(again.encode(texts[-1:])[0], v[-1], atol=1e-6)  # the newest are kept
    assert again._model is None


def test_onnx_and_torch_engines_agree() -> None:
    texts = ["a dog", "what is the capital city of the country where the river Danube ends?",
             "aspirin " * 300, "Thyroxine treats hypothyroidism."]  # one past the 256-token limit
    onnx = MiniLM(cache=False, backend="onnx", batch_size=3)
    torch = MiniLM(cache=False, backend="torch")
    a, b = onnx.encode(texts), torch.encode(texts)
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(onnx.encode(texts[1:2])[0], a[1], atol=1e-6)  # alone = in a padded batch


def test_unknown_backend_or_threads_are_refused() -> None:
    import pytest

    from kgwise.errors import ConfigError

    with pytest.raises(ConfigError, match="backend"):
        MiniLM(backend="tensorflow")
    with pytest.raises(ConfigError, match="threads"):
        MiniLM(threads=0)
    with pytest.raises(ConfigError, match="onnx backend runs on the CPU"):
        MiniLM(device="cuda")
