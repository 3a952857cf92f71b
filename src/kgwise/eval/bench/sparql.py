"""``kgwise bench sparql``: KG traversal over a SPARQL endpoint against the same graph held locally.

Per question, the access pattern of UAG's retriever: the topic entities by name (``find``), then the
out-edges of every node up to ``hops`` hops. Timed on the local graph (the baseline), on the endpoint
with an empty cache (cold: one query per node) and again on the endpoint (warm: the edge cache answers).
The edges read per question are compared between the two graphs by label (``agree``).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.sparql import SPARQLGraph

__all__ = ["run_sparql_benchmark", "traverse"]


def traverse(kg: KnowledgeGraph, names: Sequence[str], hops: int) -> Counter[tuple[str, str, str]]:
    """The ``(head, relation, tail)`` labels of every out-edge read by a ``hops``-hop walk from ``names``
    (relation names with ``_`` as space, as RDF local names give them)."""
    frontier = {v for n in names if (v := kg.find(n)) is not None}
    seen = set(frontier)
    edges: Counter[tuple[str, str, str]] = Counter()
    for _ in range(hops):
        nxt: set[int] = set()
        for v in sorted(frontier):
            rels, tails = kg.out_edges(v)
            for r, t in zip(rels.tolist(), tails.tolist(), strict=True):
                edges[(kg.label(v), kg.relation_name(r).replace("_", " "), kg.label(t))] += 1
                if t not in seen:
                    seen.add(t)
                    nxt.add(t)
        frontier = nxt
    return edges


def run_sparql_benchmark(local: KnowledgeGraph, endpoint: SPARQLGraph, topics: Sequence[Sequence[str]],
                         hops: int = 2) -> dict[str, Any]:
    """Time :func:`traverse` per question on ``local``, then cold and warm on ``endpoint``."""
    times: dict[str, list[float]] = {"local": [], "sparql_cold": [], "sparql_warm": []}
    agree = edges = 0
    for names in topics:
        t0 = time.perf_counter()
        want = traverse(local, names, hops)
        times["local"].append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        got = traverse(endpoint, names, hops)
        times["sparql_cold"].append((time.perf_counter() - t0) * 1e3)
        agree += got == want
        edges += sum(want.values())
    for names in topics:
        t0 = time.perf_counter()
        traverse(endpoint, names, hops)
        times["sparql_warm"].append((time.perf_counter() - t0) * 1e3)
    out: dict[str, Any] = {"questions": len(topics), "hops": hops, "edges_read": edges, "agree": agree}
    for k, v in times.items():
        out[f"{k}_ms_median"] = statistics.median(v) if v else None
        out[f"{k}_ms_mean"] = statistics.fmean(v) if v else None
    if out["local_ms_mean"]:
        out["cold_over_local"] = out["sparql_cold_ms_mean"] / out["local_ms_mean"]
        out["warm_over_local"] = out["sparql_warm_ms_mean"] / out["local_ms_mean"]
    out["endpoint"] = endpoint.usage()
    return out
