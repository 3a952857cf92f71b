"""Node and relation embeddings for P_RL: a node is embedded as its verbalised triples (Feng et al. 2020),
lazily, and cached per graph on disk."""

from __future__ import annotations

import hashlib
from pathlib import Path as FilePath

import numpy as np
import numpy.typing as npt

from kgwise.config import cache_dir
from kgwise.embed import Encoder
from kgwise.files import savez_atomic
from kgwise.kg.base import KnowledgeGraph
from kgwise.render.templates import clause, clean_label, relation_phrase

__all__ = ["NodeEmbeddings", "Vectors"]

Vectors = npt.NDArray[np.float32]


def _graph_key(kg: KnowledgeGraph) -> str:
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{kg.name}|{kg.num_nodes}|{kg.num_edges}|{kg.num_relations}".encode())
    for v in range(0, kg.num_nodes, max(1, kg.num_nodes // 64)):
        h.update(kg.label(v).encode())
    return h.hexdigest()


class NodeEmbeddings:
    """Lazily computed, disk-cached embeddings of a graph's nodes (verbalised triples) and relations."""

    def __init__(
        self,
        kg: KnowledgeGraph,
        encoder: Encoder,
        text_edges: int = 2,
        cache: bool | str | FilePath = True,
    ) -> None:
        self.kg = kg
        self.encoder = encoder
        self.text_edges = text_edges
        self.dim = int(encoder.dim)
        self._vecs = np.zeros((kg.num_nodes, self.dim), dtype=np.float16)
        self._have = np.zeros(kg.num_nodes, dtype=bool)
        self._dirty = False
        if cache is True:
            cache = cache_dir() / f"node-embeddings-{_graph_key(kg)}-{text_edges}.npz"
        self.path = FilePath(cache) if cache else None
        if self.path is not None and self.path.is_file():
            with np.load(self.path) as z:
                if z["vecs"].shape == self._vecs.shape:
                    self._vecs, self._have = z["vecs"].copy(), z["have"].copy()
        names = [relation_phrase(kg.relation_name(r)) for r in range(kg.num_relations)]
        self.relations = encoder.encode(names)

    def verbalise(self, node: int) -> str:
        """``label. fact. fact`` for ``node`` (its first ``text_edges`` edges, out-edges first)."""
        kg = self.kg
        parts = [clean_label(kg.label(node))]
        rels, tails = kg.out_edges(node)
        facts = [clause(kg.label(node), kg.relation_name(int(r)), kg.label(int(t)))
                 for r, t in zip(rels[: self.text_edges].tolist(), tails[: self.text_edges].tolist(),
                                 strict=True)]
        if len(facts) < self.text_edges:
            rels, heads = kg.in_edges(node)
            k = self.text_edges - len(facts)
            facts += [clause(kg.label(int(h)), kg.relation_name(int(r)), kg.label(node))
                      for r, h in zip(rels[:k].tolist(), heads[:k].tolist(), strict=True)]
        return ". ".join(parts + facts)

    def get(self, nodes: npt.ArrayLike) -> Vectors:
        """Embeddings of ``nodes`` (shape ``(n, dim)``, float32, unit rows), encoding the missing ones."""
        v = np.asarray(nodes, dtype=np.int64).reshape(-1)
        missing = np.unique(v[~self._have[v]]) if v.size else v
        if missing.size:
            vecs = self.encoder.encode([self.verbalise(int(x)) for x in missing])
            self._vecs[missing] = vecs.astype(np.float16)
            self._have[missing] = True
            self._dirty = True
        out = self._vecs[v].astype(np.float32)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)
        return out

    def save(self) -> None:
        """Write newly encoded embeddings to the cache file."""
        if self.path is None or not self._dirty:
            return
        savez_atomic(self.path, {"vecs": self._vecs, "have": self._have})
        self._dirty = False

    @property
    def encoded(self) -> int:
        return int(self._have.sum())


