"""P_sub (KnowGPT §3.2.1, Appendix A.1 idea): the 2-hop subgraph around the question and choice concepts.

Definition (the networkx reference in ``kgwise.eval.bench.nx_reference`` implements the same, naively):

1. Seeds ``S`` = question concepts ``Q`` then choice concepts ``A`` (all kept, even beyond the cap).
2. Hop 1: ``N1 = ∪ capN(s) \\ S`` over seeds (``capN``: the hub rule of
   :mod:`kgwise.extract.neighbourhood`). For ``x`` in ``N1``: ``q(x)`` = #question seeds and ``a(x)`` =
   #choice seeds whose ``capN`` holds ``x``. ``N1`` is ranked in tiers, each by the key shown:
   *bridges* (``q ≥ 1`` and ``a ≥ 1``, the intermediates of 2-hop question→choice paths, as in
   QA-GNN): ``(-(q+a), degree, id)``; other nodes reached from ≥ 2 seeds: ``(-(q+a), degree, id)``;
   nodes reached from one seed, round-robin over seeds: ``(rank in that seed's (degree, id) order,
   seed position, id)``.
3. Hop k ≥ 2 (only while room is left): ``Nk = ∪ capN(y) \\ (S ∪ N1 … N(k-1))`` over ``y`` in
   ``N(k-1)``, ranked by ``(-#y reaching it, degree, id)``.
4. Nodes are taken in that order up to ``max_nodes``; edges = every stored edge among them (sorted);
   paths = question concept → choice concept paths of ≤ ``max_path_hops`` hops over those edges, in
   either direction, ordered by ``(q position, choice-node position, length, degree of the middle node,
   middle id, relations, inverse flags)``, at most ``max_paths_per_pair`` per pair and ``max_paths``
   in all.

Low degree is the relevance tie-breaker (specific concepts before hubs, an IDF-like score). "id" is the
rule's tie key (:meth:`~kgwise.extract.neighbourhood.NeighbourRule.tie_key`): the node id, or over an
endpoint the id of the graph file its label index was built from, so both give the same nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError
from kgwise.extract.neighbourhood import IndexedNeighbours, NeighbourRule, capped_neighbours
from kgwise.extract.registry import ExtractorOptions, register_extractor
from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.grounding import Grounding
from kgwise.types import Path, Question, Subgraph

__all__ = ["SubgraphConfig", "SubgraphExtractor"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class SubgraphConfig:
    """P_sub options: ``hops`` around the concepts (KnowGPT: 2); ``max_nodes`` (QA-GNN's cap: 200);
    ``max_expand``: the per-node expansion cap of the hub rule; path caps."""

    hops: int = 2
    max_nodes: int = 200
    max_expand: int = 100
    max_path_hops: int = 2
    max_paths_per_pair: int = 3
    max_paths: int = 100

    def __post_init__(self) -> None:
        if self.hops < 1:
            raise ConfigError(f"SubgraphConfig.hops must be >= 1, got {self.hops}")
        if self.max_nodes < 1 or self.max_expand < 1:
            raise ConfigError("SubgraphConfig.max_nodes and max_expand must be >= 1")
        if self.max_path_hops not in (1, 2):
            raise ConfigError(f"SubgraphConfig.max_path_hops must be 1 or 2, got {self.max_path_hops}")
        if self.max_paths_per_pair < 0 or self.max_paths < 0:
            raise ConfigError("SubgraphConfig path caps must be >= 0")


def seeds_of(grounding: Grounding) -> tuple[list[int], list[int]]:
    """``(Q, A)``: question concepts, then the choice concepts not already in ``Q``, each distinct."""
    q = list(dict.fromkeys(grounding.question_nodes))
    qs = set(q)
    a = [n for n in grounding.all_choice_nodes if n not in qs]
    return q, a


def _positions(keys: I64, values: I64) -> I64:
    """For each value, its index in ``keys`` (distinct), or -1."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    idx = np.minimum(np.searchsorted(sk, values), sk.size - 1)
    return np.where(sk[idx] == values, order[idx], -1)


class SubgraphExtractor:
    """P_sub over any ``KnowledgeGraph``: vectorised over an in-memory ``ArrayGraph`` (its hub lists are
    built once here), node by node over others; both give the same subgraph (see
    :mod:`kgwise.extract.neighbourhood`)."""

    def __init__(self, kg: KnowledgeGraph, config: SubgraphConfig | None = None,
                 neighbours: NeighbourRule | None = None) -> None:
        self.kg = kg
        self.config = config or SubgraphConfig()
        if neighbours is not None and neighbours.cap != self.config.max_expand:
            raise ConfigError("neighbours.cap differs from config.max_expand")
        self.capped = neighbours or capped_neighbours(kg, self.config.max_expand)
        self.degree = self.capped.degree_of

    def extract(self, question: Question, grounding: Grounding) -> Subgraph:
        """The P_sub subgraph of ``question`` (only ``grounding`` is used; see the module docstring)."""
        q, a = seeds_of(grounding)
        nodes = self.select_nodes(q, a)
        among = (self.capped.edges_among if isinstance(self.capped, IndexedNeighbours)
                 else self.kg.edges_among)
        h, r, t = among(nodes) if nodes.size else (np.empty(0, np.int32),) * 3
        order = np.lexsort((t, r, h))
        h, r, t = h[order], r[order], t[order]
        paths = self.paths(q, a, h, r, t)
        return Subgraph(
            nodes=tuple(nodes.tolist()),
            edges=tuple(zip(h.tolist(), r.tolist(), t.tolist(), strict=True)),
            question_nodes=tuple(grounding.question_nodes),
            choice_nodes=tuple(tuple(c) for c in grounding.choice_nodes),
            paths=paths,
        )

    # ------------------------------------------------------------------ nodes
    def select_nodes(self, q: list[int], a: list[int]) -> I64:
        """Seeds, then ranked hop-1, hop-2 … nodes, up to ``max_nodes`` (seeds always kept)."""
        seeds = np.asarray(q + a, dtype=np.int64)
        room = self.config.max_nodes - seeds.size
        if seeds.size == 0 or room <= 0:
            return seeds
        pos, nbr = self.capped.expand(seeds)
        keep = ~np.isin(nbr, seeds)
        pos, nbr = pos[keep], nbr[keep]
        if nbr.size == 0:
            return seeds
        uniq, inv = np.unique(nbr, return_inverse=True)
        from_q = pos < len(q)
        qc = np.bincount(inv, weights=from_q, minlength=uniq.size)
        ac = np.bincount(inv, weights=~from_q, minlength=uniq.size)
        total = qc + ac
        deg = self.degree(uniq)
        tie = self.capped.tie_key(uniq)
        single = total == 1
        tier = np.where((qc > 0) & (ac > 0), 0, np.where(single, 2, 1))
        owner = np.zeros(uniq.size, dtype=np.int64)
        owner[inv] = pos  # exact for single-seed nodes, unused otherwise
        rank = np.zeros(uniq.size, dtype=np.int64)
        s_idx = np.flatnonzero(single)
        if s_idx.size:
            s_order = s_idx[np.lexsort((tie[s_idx], deg[s_idx], owner[s_idx]))]
            s_owner = owner[s_order]
            group_start = np.searchsorted(s_owner, s_owner, side="left")
            rank[s_order] = np.arange(s_order.size) - group_start
        k1 = np.where(single, rank, -total.astype(np.int64))
        k2 = np.where(single, owner, deg)
        order = np.lexsort((tie, k2, k1, tier))
        hop1 = uniq[order]
        if hop1.size >= room:
            return np.concatenate((seeds, hop1[:room]))
        chosen = [seeds, hop1]
        room -= hop1.size
        frontier = hop1
        seen = np.concatenate(chosen)
        for _ in range(2, self.config.hops + 1):
            _, nbr = self.capped.expand(frontier)
            nbr = nbr[~np.isin(nbr, seen)]
            if nbr.size == 0:
                break
            uniq, counts = np.unique(nbr, return_counts=True)
            order = np.lexsort((self.capped.tie_key(uniq), self.degree(uniq), -counts))
            ranked = uniq[order]
            if ranked.size >= room:
                chosen.append(ranked[:room])
                break
            chosen.append(ranked)
            room -= ranked.size
            frontier = ranked
            seen = np.concatenate(chosen)
        return np.concatenate(chosen)

    # ------------------------------------------------------------------ paths
    def paths(self, q: list[int], a: list[int], h: npt.NDArray[np.integer], r: npt.NDArray[np.integer],
              t: npt.NDArray[np.integer]) -> tuple[Path, ...]:
        """Question→choice paths over the edges ``(h, r, t)``; see the module docstring for the order."""
        cfg = self.config
        if not q or not a or h.size == 0 or cfg.max_paths == 0 or cfg.max_paths_per_pair == 0:
            return ()
        src = np.concatenate((h, t)).astype(np.int64)
        dst = np.concatenate((t, h)).astype(np.int64)
        rel = np.concatenate((r, r)).astype(np.int64)
        inv = np.concatenate((np.zeros(h.size, np.int64), np.ones(h.size, np.int64)))
        src_q = _positions(np.asarray(q, dtype=np.int64), src)
        dst_a = _positions(np.asarray(a, dtype=np.int64), dst)
        rows: list[I64] = []  # columns: qi, ai, length, deg(mid), tie key(mid), r1, i1, r2, i2, mid
        one = np.flatnonzero((src_q >= 0) & (dst_a >= 0))
        if one.size:
            z = np.zeros(one.size, np.int64)
            rows.append(np.stack((src_q[one], dst_a[one], z + 1, z, z - 1, rel[one], inv[one], z - 1, z - 1,
                                  z - 1), axis=1))
        if cfg.max_path_hops >= 2:
            first = np.flatnonzero((src_q >= 0) & (dst != src))
            second = np.flatnonzero(dst_a >= 0)
            if first.size and second.size:
                second = second[np.argsort(src[second], kind="stable")]
                key = src[second]
                lo = np.searchsorted(key, dst[first], side="left")
                hi = np.searchsorted(key, dst[first], side="right")
                cnt = hi - lo
                f = np.repeat(first, cnt)
                total = int(cnt.sum())
                s = second[np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(total)]
                ok = (dst[s] != src[f]) & (dst[s] != dst[f])
                f, s = f[ok], s[ok]
                if f.size:
                    mid = dst[f]
                    rows.append(np.stack((src_q[f], dst_a[s], np.full(f.size, 2), self.degree(mid),
                                          self.capped.tie_key(mid), rel[f], inv[f], rel[s], inv[s], mid),
                                         axis=1))
        if not rows:
            return ()
        m = np.concatenate(rows)
        m = m[np.lexsort(m.T[::-1])]
        pair = m[:, 0] * len(a) + m[:, 1]
        start = np.searchsorted(pair, pair, side="left")
        m = m[(np.arange(pair.size) - start) < cfg.max_paths_per_pair][: cfg.max_paths]
        out: list[Path] = []
        for qi, ai, length, _, _, r1, i1, r2, i2, mid in m.tolist():
            if length == 1:
                out.append(Path((q[qi], a[ai]), (r1,), (bool(i1),)))
            else:
                out.append(Path((q[qi], mid, a[ai]), (r1, r2), (bool(i1), bool(i2))))
        return tuple(out)


def _make_psub(kg: KnowledgeGraph, options: ExtractorOptions) -> SubgraphExtractor:
    """P_sub; over the statistics of ``options.stats`` when it has them (:class:`IndexedNeighbours`)."""
    stats = options.stats
    if stats is None or stats.hub_cap is None:
        return SubgraphExtractor(kg)
    cap = SubgraphConfig().max_expand
    return SubgraphExtractor(kg, neighbours=IndexedNeighbours(kg, stats, cap))


register_extractor("P_sub", _make_psub)
