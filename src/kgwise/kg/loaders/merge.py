"""Merge several knowledge graphs into one ``CSRGraph``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kgwise.kg.base import normalise_label
from kgwise.kg.csr import CSRGraph

__all__ = ["merge_graphs"]


def merge_graphs(graphs: Sequence[CSRGraph], name: str | None = None) -> CSRGraph:
    """One graph holding every node and edge of ``graphs``.

    Nodes whose labels normalise equally (``normalise_label``: case, ``_``/space, extra spaces) become one
    node, e.g. the WordNet lemma ``dog`` and the ConceptNet concept ``dog``; it keeps the first graph's label
    and the first non-empty text; every graph's aliases are kept. Relations with the same name become one
    relation. Duplicate edges are dropped. ``name`` defaults to the graphs' names joined with ``+``.
    """
    if not graphs:
        raise ValueError("merge_graphs needs at least one graph")
    index: dict[str, int] = {}
    labels: list[str] = []
    texts: list[str] = []
    rel_index: dict[str, int] = {}
    heads, rels, tails = [], [], []
    aliases: list[tuple[int, str]] = []
    for g in graphs:
        node_map = np.empty(g.num_nodes, dtype=np.int64)
        for i, lab in enumerate(g.labels):
            key = normalise_label(lab)
            j = index.get(key)
            if j is None:
                j = index[key] = len(labels)
                labels.append(lab)
                texts.append(g.text(i))
            elif not texts[j]:
                texts[j] = g.text(i)
            node_map[i] = j
        alias_nodes, alias_names = g.alias_pairs()
        aliases.extend(zip(node_map[alias_nodes].tolist(), alias_names, strict=True))
        rel_map = np.array([rel_index.setdefault(r, len(rel_index)) for r in g.relations], dtype=np.int64)
        h, r, t = g.all_edges()
        heads.append(node_map[h])
        rels.append(rel_map[r] if r.size else r.astype(np.int64))
        tails.append(node_map[t])
    return CSRGraph.from_arrays(
        labels,
        list(rel_index),
        np.concatenate(heads),
        np.concatenate(rels),
        np.concatenate(tails),
        texts if any(texts) else None,
        name=name if name is not None else "+".join(g.name or "graph" for g in graphs),
        aliases=aliases,
    )
