"""Capped neighbourhoods: the hub rule that keeps a 2-hop frontier from exploding.

``capN(v)`` is the set of distinct neighbours of ``v`` (edges in both directions, ``v`` itself excluded)
when there are at most ``cap`` of them; otherwise the ``cap`` neighbours with the smallest
``(degree, id)`` — the most specific ones (an IDF-like choice: a neighbour of a hub that is itself a
hub says little about the question). ``degree`` counts stored edges in both directions.

Three implementations, equal in output: :class:`CappedNeighbours` over an in-memory
:class:`~kgwise.kg.base.ArrayGraph` computes every degree and the lists of the nodes with more than ``cap``
incident edges (hub candidates) once, vectorised, and expands every other node on the fly from the edge
arrays; :class:`LazyCappedNeighbours` works over any :class:`~kgwise.kg.base.KnowledgeGraph` (a SPARQL
endpoint), node by node, asking for a degree or a ``capN`` only when it is needed and keeping it;
:class:`IndexedNeighbours` takes the degrees and the hubs' lists from the statistics a label index keeps
(:mod:`kgwise.kg.hubs`) and reads only the other nodes' short edge lists from the graph, all the lists one
expansion needs in one round trip when the graph reads in batches (:class:`~kgwise.kg.base.BatchReader`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError
from kgwise.kg.base import ArrayGraph, BatchReader, EdgeArrays, KnowledgeGraph
from kgwise.kg.hubs import hub_lists, split_incident

__all__ = ["CappedNeighbours", "HubStats", "IndexedNeighbours", "LazyCappedNeighbours", "NeighbourRule",
           "capped_neighbours"]

I64 = npt.NDArray[np.int64]


class NeighbourRule(Protocol):
    """``capN`` with its ``cap`` and the degrees it ranks by."""

    cap: int

    def degree_of(self, nodes: I64) -> I64:
        """Stored edges touching each of ``nodes`` (both directions)."""
        ...

    def expand(self, nodes: npt.ArrayLike) -> tuple[I64, I64]:
        """``(pos, nbr)``: one pair ``(i, u)`` for every ``u`` in ``capN(nodes[i])``, grouped by ``pos``."""
        ...

    def tie_key(self, nodes: I64) -> I64:
        """What breaks ties in degree between ``nodes`` (their ids, unless told otherwise)."""
        ...


def capped_neighbours(kg: KnowledgeGraph, cap: int) -> NeighbourRule:
    """The vectorised rule when ``kg`` hands out edge arrays, else the node-by-node one."""
    return CappedNeighbours(kg, cap) if isinstance(kg, ArrayGraph) else LazyCappedNeighbours(kg, cap)


class CappedNeighbours:
    """Vectorised ``capN`` over an in-memory ``ArrayGraph`` (see the module docstring)."""

    def __init__(self, kg: ArrayGraph, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.kg = kg
        self.cap = cap
        lists = hub_lists(kg, cap)
        self.degree: I64 = lists.degree
        self.hub_row = lists.hub_row()
        self.hub_ptr = lists.ptr
        self.hub_nbr = lists.nbr
        self.num_hubs = int(lists.hubs.size)

    def degree_of(self, nodes: I64) -> I64:
        return self.degree[nodes]

    def tie_key(self, nodes: I64) -> I64:
        return np.asarray(nodes, dtype=np.int64)

    def expand(self, nodes: npt.ArrayLike) -> tuple[I64, I64]:
        """``(pos, nbr)``: for every ``i`` and every ``u`` in ``capN(nodes[i])``, one pair ``(i, u)``.

        Pairs are grouped by ``pos``; within a group, neighbours are distinct.
        """
        v = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
        rows = self.hub_row[v]
        is_hub = rows >= 0
        parts_pos: list[I64] = []
        parts_nbr: list[I64] = []
        if is_hub.any():
            hpos = np.flatnonzero(is_hub)
            r = rows[hpos]
            starts, ends = self.hub_ptr[r], self.hub_ptr[r + 1]
            lengths = ends - starts
            total = int(lengths.sum())
            idx = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
            parts_pos.append(np.repeat(hpos, lengths))
            parts_nbr.append(self.hub_nbr[idx])
        if not is_hub.all():
            spos = np.flatnonzero(~is_hub)
            sv = v[spos]
            owner, other = split_incident(self.kg, sv)
            # map owner node back to its position(s) in ``nodes`` among the small ones
            order = np.argsort(sv, kind="stable")
            pos = spos[order[np.searchsorted(sv[order], owner)]]
            n = np.int64(max(self.kg.num_nodes, 1))
            key = np.unique(pos * n + other)
            pos, other = np.divmod(key, n)
            keep = other != v[pos]
            parts_pos.append(pos[keep])
            parts_nbr.append(other[keep])
        pos_all = np.concatenate(parts_pos)
        nbr_all = np.concatenate(parts_nbr)
        if len(parts_pos) > 1:
            order = np.argsort(pos_all, kind="stable")
            pos_all, nbr_all = pos_all[order], nbr_all[order]
        return pos_all, nbr_all

    def neighbours(self, node: int) -> I64:
        """``capN(node)`` as an array sorted by ``(degree, id)``."""
        _, nbr = self.expand([node])
        return nbr[np.lexsort((nbr, self.degree[nbr]))]


class LazyCappedNeighbours:
    """``capN`` over any ``KnowledgeGraph``, one node at a time through ``out_edges``/``in_edges`` and
    ``degree``; degrees and lists are kept once asked for (see the module docstring)."""

    def __init__(self, kg: KnowledgeGraph, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.kg = kg
        self.cap = cap
        self._degree: dict[int, int] = {}
        self._lists: dict[int, I64] = {}

    def degree_of(self, nodes: I64) -> I64:
        v = np.asarray(nodes, dtype=np.int64).reshape(-1)
        missing = [x for x in dict.fromkeys(v.tolist()) if x not in self._degree]
        if missing:
            found = np.asarray(self.kg.degree(np.asarray(missing, dtype=np.int64), "both")).tolist()
            self._degree.update(zip(missing, (int(d) for d in found), strict=True))
        return np.fromiter((self._degree[x] for x in v.tolist()), dtype=np.int64, count=v.size)

    def tie_key(self, nodes: I64) -> I64:
        return np.asarray(nodes, dtype=np.int64)

    def capped(self, node: int) -> I64:
        """``capN(node)``, sorted by id (only a hub's neighbours need their degrees)."""
        found = self._lists.get(node)
        if found is None:
            other = np.concatenate((self.kg.out_edges(node)[1], self.kg.in_edges(node)[1])).astype(np.int64)
            other = np.unique(other[other != node])
            if other.size > self.cap:
                other = np.sort(other[np.lexsort((other, self.degree_of(other)))][: self.cap])
            found = self._lists[node] = other
        return found

    def expand(self, nodes: npt.ArrayLike) -> tuple[I64, I64]:
        v = np.atleast_1d(np.asarray(nodes, dtype=np.int64)).tolist()
        lists = [self.capped(int(x)) for x in v]
        pos = np.repeat(np.arange(len(v), dtype=np.int64), [x.size for x in lists])
        nbr = np.concatenate(lists) if lists else np.empty(0, np.int64)
        return pos, nbr.astype(np.int64)

    def neighbours(self, node: int) -> I64:
        """``capN(node)`` as an array sorted by ``(degree, id)``."""
        nbr = self.capped(node)
        return nbr[np.lexsort((nbr, self.degree_of(nbr)))]


class HubStats(Protocol):
    """Stored degrees and hub lists of a graph (a bound label index: ``kgwise.kg.label_index.BoundIndex``),
    in that graph's node ids."""

    @property
    def hub_cap(self) -> int | None:
        """The cap the hub lists were built for (``None``: no statistics)."""
        ...

    def degree_of(self, nodes: Sequence[int]) -> I64:
        """Edges touching each node (both directions); -1 where unknown."""
        ...

    def hub_neighbours(self, node: int) -> I64 | None:
        """``capN(node)`` of a hub, or ``None`` when ``node`` is none (or unknown)."""
        ...

    def index_ids(self, nodes: Sequence[int]) -> I64:
        """The ids the statistics were computed with (-1 where unknown)."""
        ...


class IndexedNeighbours:
    """``capN`` with degrees and hub lists from ``stats`` and the other nodes' edge lists from ``kg`` (see
    the module docstring); a node the statistics do not know is handled as :class:`LazyCappedNeighbours`
    handles every node."""

    def __init__(self, kg: KnowledgeGraph, stats: HubStats, cap: int) -> None:
        if stats.hub_cap != cap:
            raise ConfigError(f"the label index keeps hub lists for a cap of {stats.hub_cap}, not {cap}: "
                              "P_sub's max_expand must match it (or rebuild the index from a graph file)")
        self.kg = kg
        self.stats = stats
        self.cap = cap
        self._lazy = LazyCappedNeighbours(kg, cap)
        self._lists: dict[int, I64] = {}

    def degree_of(self, nodes: I64) -> I64:
        v = np.asarray(nodes, dtype=np.int64).reshape(-1)
        d = self.stats.degree_of(v.tolist())
        unknown = d < 0
        if unknown.any():
            d = d.copy()
            d[unknown] = self._lazy.degree_of(v[unknown])
        return d

    def tie_key(self, nodes: I64) -> I64:
        """The ids of the graph the statistics were computed from (so ties break as there); a node they do
        not know comes after every known one, by its own id."""
        v = np.asarray(nodes, dtype=np.int64).reshape(-1)
        ids = self.stats.index_ids(v.tolist())
        return np.where(ids >= 0, ids, np.int64(1) << 40 | v)

    def expand(self, nodes: npt.ArrayLike) -> tuple[I64, I64]:
        v = np.atleast_1d(np.asarray(nodes, dtype=np.int64)).tolist()
        todo = [x for x in dict.fromkeys(v) if x not in self._lists]
        if todo:
            small: list[int] = []
            for x, d in zip(todo, self.degree_of(np.asarray(todo, dtype=np.int64)).tolist(), strict=True):
                hub = self.stats.hub_neighbours(x) if d > self.cap else None
                if hub is not None:
                    self._lists[x] = np.sort(hub)
                else:
                    small.append(x)
            if small and isinstance(self.kg, BatchReader):
                self.kg.prefetch(small, None)
            for x in small:
                self._lists[x] = self._lazy.capped(x)
        lists = [self._lists[x] for x in v]
        pos = np.repeat(np.arange(len(v), dtype=np.int64), [x.size for x in lists])
        nbr = np.concatenate(lists) if lists else np.empty(0, np.int64)
        return pos, nbr.astype(np.int64)

    def neighbours(self, node: int) -> I64:
        """``capN(node)`` as an array sorted by ``(degree, id)``."""
        _, nbr = self.expand([node])
        return nbr[np.lexsort((nbr, self.degree_of(nbr)))]

    def edges_among(self, nodes: I64) -> EdgeArrays:
        """Every edge among ``nodes``; over a graph read in batches, without reading a hub's edge list
        (the hubs are the nodes of more than ``cap`` edges)."""
        if not isinstance(self.kg, BatchReader):
            return self.kg.edges_among(nodes)
        v = np.asarray(nodes, dtype=np.int64).reshape(-1)
        hubs = v[self.degree_of(v) > self.cap]
        return self.kg.edges_among(v, set(hubs.tolist()))
