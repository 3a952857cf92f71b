"""The baseline: P_sub written the way RoG/ToG-style code does it, with networkx and Python sets.

Same definition as :mod:`kgwise.extract.subgraph` (hub rule, ranking, paths) and the same output,
computed per question from a ``networkx.MultiDiGraph`` of the whole KG (edge key = relation id), with
no precomputation: hub neighbourhoods are sorted at query time, the induced subgraph comes from
``G.subgraph`` and paths from ``nx.all_simple_paths`` on its undirected view. Grounding is shared
(the same ``Grounder``): only the extraction differs.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from kgwise.extract.subgraph import SubgraphConfig, seeds_of
from kgwise.kg.csr import CSRGraph
from kgwise.kg.grounding import Grounding
from kgwise.types import Path, Question, Subgraph

__all__ = ["NxSubgraphExtractor", "to_networkx"]


def to_networkx(kg: CSRGraph) -> nx.MultiDiGraph:
    """The whole graph as a ``MultiDiGraph`` over node ids; edge key = relation id."""
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(kg.num_nodes))
    h, r, t = kg.all_edges()
    g.add_edges_from(zip(h.tolist(), t.tolist(), r.tolist(), strict=True))
    return g


class NxSubgraphExtractor:
    """P_sub over a networkx graph; output equals ``SubgraphExtractor``'s on the same graph."""

    def __init__(self, graph: nx.MultiDiGraph, config: SubgraphConfig | None = None) -> None:
        self.g = graph
        self.config = config or SubgraphConfig()

    def capped(self, v: int) -> set[int]:
        nbrs = set(self.g.successors(v)) | set(self.g.predecessors(v))
        nbrs.discard(v)
        if len(nbrs) <= self.config.max_expand:
            return nbrs
        deg = self.g.degree
        return set(sorted(nbrs, key=lambda u: (deg(u), u))[: self.config.max_expand])

    def extract(self, question: Question, grounding: Grounding) -> Subgraph:
        q, a = seeds_of(grounding)
        nodes = self.select_nodes(q, a)
        sub = self.g.subgraph(nodes)
        edges = sorted((u, k, v) for u, v, k in sub.edges(keys=True))
        return Subgraph(
            nodes=tuple(nodes),
            edges=tuple(edges),
            question_nodes=tuple(grounding.question_nodes),
            choice_nodes=tuple(tuple(c) for c in grounding.choice_nodes),
            paths=self.paths(q, a, sub),
        )

    def select_nodes(self, q: list[int], a: list[int]) -> list[int]:
        seeds = q + a
        room = self.config.max_nodes - len(seeds)
        if not seeds or room <= 0:
            return seeds
        seed_set = set(seeds)
        deg = self.g.degree
        qc: dict[int, int] = {}
        ac: dict[int, int] = {}
        owner: dict[int, int] = {}
        for i, s in enumerate(seeds):
            for x in self.capped(s):
                if x in seed_set:
                    continue
                counts = qc if i < len(q) else ac
                counts[x] = counts.get(x, 0) + 1
                owner[x] = i
        hop1 = set(qc) | set(ac)
        if not hop1:
            return seeds

        def total(x: int) -> int:
            return qc.get(x, 0) + ac.get(x, 0)

        bridges = sorted((x for x in hop1 if qc.get(x) and ac.get(x)), key=lambda x: (-total(x), deg(x), x))
        multi = sorted((x for x in hop1 if total(x) >= 2 and not (qc.get(x) and ac.get(x))),
                       key=lambda x: (-total(x), deg(x), x))
        by_seed: dict[int, list[int]] = {}
        for x in hop1:
            if total(x) == 1:
                by_seed.setdefault(owner[x], []).append(x)
        single: list[tuple[int, int, int]] = []
        for i, xs in by_seed.items():
            for rank, x in enumerate(sorted(xs, key=lambda x: (deg(x), x))):
                single.append((rank, i, x))
        ranked = bridges + multi + [x for _, _, x in sorted(single)]
        if len(ranked) >= room:
            return seeds + ranked[:room]
        chosen = seeds + ranked
        room -= len(ranked)
        frontier = ranked
        for _ in range(2, self.config.hops + 1):
            seen = set(chosen)
            count: dict[int, int] = {}
            for y in frontier:
                for x in self.capped(y):
                    if x not in seen:
                        count[x] = count.get(x, 0) + 1
            if not count:
                break
            nxt = sorted(count, key=lambda x: (-count[x], deg(x), x))
            if len(nxt) >= room:
                chosen += nxt[:room]
                break
            chosen += nxt
            room -= len(nxt)
            frontier = nxt
        return chosen

    def _arcs(self, sub: nx.MultiDiGraph, u: int, v: int) -> Iterable[tuple[int, int]]:
        """``(relation, inverse)`` of every edge between ``u`` and ``v`` walked from ``u`` to ``v``."""
        for k in sub.get_edge_data(u, v, default={}):
            yield k, 0
        for k in sub.get_edge_data(v, u, default={}):
            yield k, 1

    def paths(self, q: list[int], a: list[int], sub: nx.MultiDiGraph) -> tuple[Path, ...]:
        cfg = self.config
        if not q or not a or cfg.max_paths == 0 or cfg.max_paths_per_pair == 0:
            return ()
        und = sub.to_undirected(as_view=True)
        deg = self.g.degree
        out: list[tuple[int, ...]] = []
        for qi, qn in enumerate(q):
            for ai, an in enumerate(a):
                rows: list[tuple[int, ...]] = []
                walks = {tuple(p) for p in nx.all_simple_paths(und, qn, an, cutoff=cfg.max_path_hops)}
                for p in walks:
                    if len(p) == 2:
                        rows.extend((qi, ai, 1, 0, -1, r, i, -1, -1) for r, i in self._arcs(sub, qn, an))
                    else:
                        m = p[1]
                        for r1, i1 in self._arcs(sub, qn, m):
                            for r2, i2 in self._arcs(sub, m, an):
                                rows.append((qi, ai, 2, deg(m), m, r1, i1, r2, i2))
                out.extend(sorted(rows)[: cfg.max_paths_per_pair])
        paths: list[Path] = []
        for qi, ai, length, _, m, r1, i1, r2, i2 in sorted(out)[: cfg.max_paths]:
            if length == 1:
                paths.append(Path((q[qi], a[ai]), (r1,), (bool(i1),)))
            else:
                paths.append(Path((q[qi], m, a[ai]), (r1, r2), (bool(i1), bool(i2))))
        return tuple(paths)
