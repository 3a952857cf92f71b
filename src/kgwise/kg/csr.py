"""``CSRGraph``: an in-memory knowledge graph on compressed-sparse-row arrays, with a fast binary cache."""

from __future__ import annotations

import itertools
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from kgwise.errors import DataError, UnknownNodeError
from kgwise.files import savez_atomic
from kgwise.kg.base import Direction, EdgeArrays, IdArray, normalise_label
from kgwise.types import Triple

__all__ = ["CSRGraph"]

_FORMAT_VERSION = 1


def _pack_strings(strings: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def _unpack_strings(blob: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> list[str]:
    data = blob.tobytes()
    bounds = offsets.tolist()
    return [data[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]


def _gather(ptr: npt.NDArray[np.int64], nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Positions ``ptr[v] … ptr[v+1]-1`` for every ``v`` in ``nodes``, concatenated (no Python loop)."""
    starts = ptr[nodes]
    lengths = ptr[nodes + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _alias_table(labels: Sequence[str], pairs: Iterable[tuple[int, str]]
                 ) -> tuple[IdArray, list[str]]:
    """Aliases sorted by node (stable), without blanks, repeats, or names that normalise like the node's
    label; ``ValueError`` for a node id outside the labels."""
    n = len(labels)
    seen: set[tuple[int, str]] = set()
    kept: list[tuple[int, str]] = []
    for node, name in pairs:
        node = int(node)
        if not 0 <= node < n:
            raise ValueError(f"alias {name!r} of node {node} outside 0..{n - 1}")
        key = normalise_label(name)
        if key and key != normalise_label(labels[node]) and (node, key) not in seen:
            seen.add((node, key))
            kept.append((node, name))
    kept.sort(key=lambda x: x[0])
    return np.asarray([v for v, _ in kept], dtype=np.int32), [a for _, a in kept]


def npz_path(path: str | Path) -> Path:
    """Where :meth:`CSRGraph.save` writes ``path``: as given when it ends in ``.npz``, else with ``.npz``
    appended (``g`` → ``g.npz``, ``g.txt`` → ``g.txt.npz``)."""
    p = Path(path)
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


class CSRGraph:
    """A directed multigraph with labelled nodes and relations, stored as forward and reverse CSR arrays.

    Build one with :meth:`from_arrays` or :meth:`from_triples`; save it with :meth:`save` and reopen it
    with :meth:`load`. Edges are deduplicated. Node ``texts`` (glosses, descriptions) are optional, and so
    are ``aliases``: ``(node, name)`` pairs, every other name a source gives a node (synonyms, surface
    forms, ``skos:altLabel``); a node is still shown by its ``label`` (the preferred name).
    """

    def __init__(
        self,
        labels: Sequence[str],
        relations: Sequence[str],
        out_ptr: npt.NDArray[np.int64],
        out_rel: IdArray,
        out_dst: IdArray,
        in_ptr: npt.NDArray[np.int64],
        in_rel: IdArray,
        in_src: IdArray,
        texts: Sequence[str] | None = None,
        name: str = "",
        aliases: Iterable[tuple[int, str]] | None = None,
    ) -> None:
        self._labels = list(labels)
        self._alias_node, self._alias_names = _alias_table(self._labels, aliases or ())
        self._relations = list(relations)
        self._out_ptr, self._out_rel, self._out_dst = out_ptr, out_rel, out_dst
        self._in_ptr, self._in_rel, self._in_src = in_ptr, in_rel, in_src
        self._texts = list(texts) if texts is not None else None
        self._index: tuple[dict[str, int], dict[str, int], dict[str, int]] | None = None
        self.name = name

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        labels: Sequence[str],
        relations: Sequence[str],
        heads: npt.ArrayLike,
        rels: npt.ArrayLike,
        tails: npt.ArrayLike,
        texts: Sequence[str] | None = None,
        name: str = "",
        aliases: Iterable[tuple[int, str]] | None = None,
    ) -> CSRGraph:
        """Build from aligned edge arrays of node and relation ids; duplicate edges are dropped; ``aliases``
        are ``(node id, other name)`` pairs."""
        n, k = len(labels), len(relations)
        h = np.asarray(heads, dtype=np.int64)
        r = np.asarray(rels, dtype=np.int64)
        t = np.asarray(tails, dtype=np.int64)
        if not (h.shape == r.shape == t.shape) or h.ndim != 1:
            raise ValueError("heads, rels and tails must be 1-d arrays of equal length")
        if texts is not None and len(texts) != n:
            raise ValueError(f"{len(texts)} node texts for {n} nodes")
        if h.size:
            if min(h.min(), t.min()) < 0 or max(h.max(), t.max()) >= n:
                raise ValueError(f"edge endpoint outside 0..{n - 1}")
            if r.min() < 0 or r.max() >= k:
                raise ValueError(f"relation id outside 0..{k - 1}")
        # one int64 key per edge, sorted: groups by head, dedups (head, rel, tail)
        key = np.unique((h * k + r) * n + t)
        h, rest = np.divmod(key, k * n)
        r, t = np.divmod(rest, n)
        out_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(h, minlength=n), out=out_ptr[1:])
        order = np.lexsort((h, r, t))  # by tail, then relation, then head
        in_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(t, minlength=n), out=in_ptr[1:])
        return cls(
            labels,
            relations,
            out_ptr,
            r.astype(np.int32),
            t.astype(np.int32),
            in_ptr,
            r[order].astype(np.int32),
            h[order].astype(np.int32),
            texts,
            name,
            aliases,
        )

    @classmethod
    def from_triples(
        cls, triples: Iterable[tuple[str, str, str]], texts: dict[str, str] | None = None, name: str = "",
        aliases: dict[str, Sequence[str]] | None = None,
    ) -> CSRGraph:
        """Build from ``(head, relation, tail)`` label triples; nodes and relations are interned by label;
        ``aliases``: label → the node's other names."""
        nodes: dict[str, int] = {}
        relations: dict[str, int] = {}
        hs: list[int] = []
        rs: list[int] = []
        ts: list[int] = []
        for head, rel, tail in triples:
            hs.append(nodes.setdefault(head, len(nodes)))
            rs.append(relations.setdefault(rel, len(relations)))
            ts.append(nodes.setdefault(tail, len(nodes)))
        labels = list(nodes)
        node_texts = [texts.get(x, "") for x in labels] if texts is not None else None
        pairs = [(nodes[k], a) for k, names in (aliases or {}).items() if k in nodes for a in names]
        return cls.from_arrays(labels, list(relations), hs, rs, ts, node_texts, name, pairs)

    # ------------------------------------------------------------------ sizes and names
    @property
    def num_nodes(self) -> int:
        return len(self._labels)

    @property
    def num_edges(self) -> int:
        return len(self._out_dst)

    @property
    def num_relations(self) -> int:
        return len(self._relations)

    @property
    def labels(self) -> Sequence[str]:
        return self._labels

    @property
    def relations(self) -> Sequence[str]:
        return self._relations

    def label(self, node: int) -> str:
        self._check(node)
        return self._labels[node]

    def text(self, node: int) -> str:
        """The node's description (e.g. a WordNet gloss), or ``""``."""
        self._check(node)
        return self._texts[node] if self._texts is not None else ""

    def aliases(self, node: int) -> tuple[str, ...]:
        """The node's other names (not its label), in the order the source gave them."""
        self._check(node)
        a, b = np.searchsorted(self._alias_node, [node, node + 1])
        return tuple(self._alias_names[int(a):int(b)])

    def alias_pairs(self) -> tuple[IdArray, Sequence[str]]:
        """Every alias as aligned ``(node ids, names)``, sorted by node."""
        return self._alias_node, self._alias_names

    def relation_name(self, relation: int) -> str:
        if not 0 <= relation < len(self._relations):
            raise UnknownNodeError(f"relation id {relation} not in 0..{len(self._relations) - 1}")
        return self._relations[relation]

    def relation_id(self, name: str) -> int:
        try:
            return self._relations.index(name)
        except ValueError:
            raise UnknownNodeError(f"relation {name!r} not in graph {self.name or '(unnamed)'}") from None

    # ------------------------------------------------------------------ lookup
    def _label_index(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """Each exact label, each normalised label and each normalised alias to the first node so named."""
        if self._index is None:
            exact: dict[str, int] = {}
            normalised: dict[str, int] = {}
            for i, lab in enumerate(self._labels):
                exact.setdefault(lab, i)
                normalised.setdefault(normalise_label(lab), i)
            alias: dict[str, int] = {}
            for v, name in zip(self._alias_node.tolist(), self._alias_names, strict=True):
                alias.setdefault(normalise_label(name), v)
            self._index = exact, normalised, alias
        return self._index

    def find(self, label: str) -> int | None:
        """The node labelled exactly ``label``, else the first whose label normalises
        (:func:`~kgwise.kg.base.normalise_label`) as ``label`` does, else the first with such an alias;
        None when there is none."""
        exact, normalised, alias = self._label_index()
        found = exact.get(label)
        if found is None:
            key = normalise_label(label)
            found = normalised.get(key)
            if found is None:
                found = alias.get(key)
        return found

    def node(self, key: str | int) -> int:
        """A node id from an id or a label; raises ``UnknownNodeError`` naming the key."""
        if isinstance(key, int | np.integer):
            self._check(int(key))
            return int(key)
        found = self.find(key)
        if found is None:
            from kgwise.kg.linking import did_you_mean

            raise UnknownNodeError(f"node {key!r} not found in graph {self.name or '(unnamed)'}"
                                   + did_you_mean(key, self))
        return found

    def _check(self, node: int) -> None:
        if not 0 <= node < len(self._labels):
            raise UnknownNodeError(f"node id {node} not in 0..{len(self._labels) - 1}")

    # ------------------------------------------------------------------ adjacency
    def out_edges(self, node: int) -> tuple[IdArray, IdArray]:
        self._check(node)
        a, b = self._out_ptr[node], self._out_ptr[node + 1]
        return self._out_rel[a:b], self._out_dst[a:b]

    def in_edges(self, node: int) -> tuple[IdArray, IdArray]:
        self._check(node)
        a, b = self._in_ptr[node], self._in_ptr[node + 1]
        return self._in_rel[a:b], self._in_src[a:b]

    def degree(self, nodes: npt.ArrayLike, direction: Direction = "both") -> npt.NDArray[np.int64]:
        v = self._ids(nodes)
        out = self._out_ptr[v + 1] - self._out_ptr[v]
        inn = self._in_ptr[v + 1] - self._in_ptr[v]
        return {"out": out, "in": inn, "both": out + inn}[direction]

    def incident(self, nodes: npt.ArrayLike, direction: Direction = "both") -> EdgeArrays:
        """All edges leaving (``out``), entering (``in``) or touching (``both``) any of ``nodes``,
        as stored ``(heads, relations, tails)``."""
        v = self._ids(nodes)
        parts: list[EdgeArrays] = []
        if direction in ("out", "both"):
            pos = _gather(self._out_ptr, v)
            src = np.repeat(v, self._out_ptr[v + 1] - self._out_ptr[v]).astype(np.int32)
            parts.append((src, self._out_rel[pos], self._out_dst[pos]))
        if direction in ("in", "both"):
            pos = _gather(self._in_ptr, v)
            dst = np.repeat(v, self._in_ptr[v + 1] - self._in_ptr[v]).astype(np.int32)
            parts.append((self._in_src[pos], self._in_rel[pos], dst))
        h, r, t = (np.concatenate(x) for x in zip(*parts, strict=True))
        return h, r, t

    def neighbors(self, nodes: npt.ArrayLike, direction: Direction = "both") -> IdArray:
        v = self._ids(nodes)
        found: list[IdArray] = []
        if direction in ("out", "both"):
            found.append(self._out_dst[_gather(self._out_ptr, v)])
        if direction in ("in", "both"):
            found.append(self._in_src[_gather(self._in_ptr, v)])
        return np.unique(np.concatenate(found))

    def edges_among(self, nodes: npt.ArrayLike) -> EdgeArrays:
        v = np.unique(self._ids(nodes))
        pos = _gather(self._out_ptr, v)
        src = np.repeat(v, self._out_ptr[v + 1] - self._out_ptr[v]).astype(np.int32)
        dst = self._out_dst[pos]
        mask = np.zeros(self.num_nodes, dtype=bool)
        mask[v] = True
        keep = mask[dst]
        return src[keep], self._out_rel[pos][keep], dst[keep]

    def all_edges(self) -> EdgeArrays:
        """Every edge as ``(heads, relations, tails)``, sorted by head."""
        heads = np.repeat(np.arange(self.num_nodes, dtype=np.int32), np.diff(self._out_ptr))
        return heads, self._out_rel, self._out_dst

    def triples(self, heads: npt.ArrayLike, rels: npt.ArrayLike, tails: npt.ArrayLike) -> list[Triple]:
        """Edges as label ``Triple``s."""
        lab, rn = self._labels, self._relations
        hs, rs, ts = (np.asarray(x).tolist() for x in (heads, rels, tails))
        return [Triple(lab[h], rn[r], lab[t]) for h, r, t in zip(hs, rs, ts, strict=True)]

    def _ids(self, nodes: npt.ArrayLike) -> npt.NDArray[np.int64]:
        v = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
        if v.size and (v.min() < 0 or v.max() >= self.num_nodes):
            bad = v[(v < 0) | (v >= self.num_nodes)][0]
            raise UnknownNodeError(f"node id {bad} not in 0..{self.num_nodes - 1}")
        return v

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the graph to one uncompressed ``.npz`` file (loads in well under a second per million
        edges)."""
        path = npz_path(path)
        label_blob, label_off = _pack_strings(self._labels)
        rel_blob, rel_off = _pack_strings(self._relations)
        arrays: dict[str, npt.NDArray[np.generic]] = {
            "version": np.array([_FORMAT_VERSION]),
            "name": np.frombuffer(self.name.encode("utf-8"), dtype=np.uint8),
            "label_blob": label_blob,
            "label_off": label_off,
            "rel_blob": rel_blob,
            "rel_off": rel_off,
            "out_ptr": self._out_ptr,
            "out_rel": self._out_rel,
            "out_dst": self._out_dst,
            "in_ptr": self._in_ptr,
            "in_rel": self._in_rel,
            "in_src": self._in_src,
        }
        if self._texts is not None:
            arrays["text_blob"], arrays["text_off"] = _pack_strings(self._texts)
        if len(self._alias_names):
            arrays["alias_blob"], arrays["alias_off"] = _pack_strings(self._alias_names)
            arrays["alias_node"] = self._alias_node
        return savez_atomic(path, arrays)

    @classmethod
    def load(cls, path: str | Path) -> CSRGraph:
        """Open a graph written by :meth:`save`; raises ``DataError`` naming the file if it is not one."""
        path = Path(path)
        if not path.is_file():
            raise DataError("graph file not found", path)
        try:
            with np.load(path, allow_pickle=False) as z:
                if "version" not in z or int(z["version"][0]) != _FORMAT_VERSION:
                    raise DataError("not a kgwise graph file (or written by another version)", path)
                texts = _unpack_strings(z["text_blob"], z["text_off"]) if "text_blob" in z else None
                aliases = (zip(z["alias_node"].tolist(), _unpack_strings(z["alias_blob"], z["alias_off"]),
                               strict=True) if "alias_blob" in z else None)
                return cls(
                    _unpack_strings(z["label_blob"], z["label_off"]),
                    _unpack_strings(z["rel_blob"], z["rel_off"]),
                    z["out_ptr"],
                    z["out_rel"],
                    z["out_dst"],
                    z["in_ptr"],
                    z["in_rel"],
                    z["in_src"],
                    texts,
                    z["name"].tobytes().decode("utf-8"),
                    aliases,
                )
        except (zipfile.BadZipFile, ValueError, KeyError, OSError) as exc:
            if isinstance(exc, DataError):
                raise
            if not zipfile.is_zipfile(path):  # numpy would talk of pickled data
                msg = "not a graph file written by `kgwise kg build` (an .npz archive)"
                raise DataError(msg, path) from exc
            raise DataError(f"cannot read graph file: {exc}", path) from exc

    def __repr__(self) -> str:
        return (
            f"CSRGraph(name={self.name!r}, nodes={self.num_nodes:,}, edges={self.num_edges:,}, "
            f"relations={self.num_relations})"
        )
