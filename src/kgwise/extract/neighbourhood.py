"""Capped neighbourhoods: the hub rule that keeps a 2-hop frontier from exploding.

``capN(v)`` is the set of distinct neighbours of ``v`` (edges in both directions, ``v`` itself excluded)
when there are at most ``cap`` of them; otherwise the ``cap`` neighbours with the smallest
``(degree, id)`` — the most specific ones (an IDF-like choice: a neighbour of a hub that is itself a
hub says little about the question). ``degree`` counts stored edges in both directions.

The lists of nodes with more than ``cap`` incident edges (hub candidates) are computed once, vectorised,
when the object is built; every other node is expanded on the fly from the CSR arrays.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kgwise.kg.csr import CSRGraph

__all__ = ["CappedNeighbours"]

I64 = npt.NDArray[np.int64]


def _split_incident(kg: CSRGraph, nodes: I64) -> tuple[I64, I64]:
    """``(owner, neighbour)`` for every edge touching ``nodes`` (both directions), as int64."""
    h, _, t = kg.incident(nodes, "both")
    n_out = int(kg.degree(nodes, "out").sum())
    owner = np.concatenate((h[:n_out], t[n_out:])).astype(np.int64)
    other = np.concatenate((t[:n_out], h[n_out:])).astype(np.int64)
    return owner, other


class CappedNeighbours:
    """Vectorised ``capN`` over a ``CSRGraph`` (see the module docstring)."""

    def __init__(self, kg: CSRGraph, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.kg = kg
        self.cap = cap
        n = kg.num_nodes
        self.degree: I64 = kg.degree(np.arange(n, dtype=np.int64), "both").astype(np.int64)
        hubs = np.flatnonzero(self.degree > cap).astype(np.int64)
        self.hub_row = np.full(n, -1, dtype=np.int64)
        self.hub_row[hubs] = np.arange(hubs.size, dtype=np.int64)
        owner, other = _split_incident(kg, hubs) if hubs.size else (np.empty(0, np.int64),) * 2
        keep = owner != other
        row, other = self.hub_row[owner[keep]], other[keep]
        order = np.lexsort((other, self.degree[other], row))
        row, other = row[order], other[order]
        if row.size:  # drop repeated (row, neighbour): equal pairs are adjacent after the sort
            first = np.ones(row.size, dtype=bool)
            first[1:] = (row[1:] != row[:-1]) | (other[1:] != other[:-1])
            row, other = row[first], other[first]
        starts = np.searchsorted(row, np.arange(hubs.size, dtype=np.int64))
        rank = np.arange(row.size, dtype=np.int64) - starts[row] if row.size else row
        take = rank < cap
        row, other = row[take], other[take]
        self.hub_ptr = np.zeros(hubs.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=hubs.size), out=self.hub_ptr[1:])
        self.hub_nbr = other
        self.num_hubs = int(hubs.size)

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
            owner, other = _split_incident(self.kg, sv)
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
