"""Degrees and hub lists of an in-memory graph: the statistics P_sub's hub rule ranks by.

``capN(v)`` (:mod:`kgwise.extract.neighbourhood`) is every distinct neighbour of ``v`` when ``v`` has at
most ``cap`` incident edges, else the ``cap`` neighbours with the smallest ``(degree, id)``. The second
case needs the degree of every neighbour of a hub, so it is computed once for the whole graph here (one
vectorised pass): the in-memory rule keeps it in memory, and a label index stores it beside the names so
that P_sub over a SPARQL endpoint never reads a hub's edge list. :func:`edge_hub_lists` computes the same
from bare edge arrays (an N-Triples dump or an endpoint's triples, counted as they stream by).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kgwise.kg.base import ArrayGraph

__all__ = ["HubLists", "edge_hub_lists", "hub_lists", "split_incident"]

I64 = npt.NDArray[np.int64]


def split_incident(kg: ArrayGraph, nodes: I64) -> tuple[I64, I64]:
    """``(owner, neighbour)`` for every edge touching ``nodes`` (both directions), as int64."""
    h, _, t = kg.incident(nodes, "both")
    n_out = int(kg.degree(nodes, "out").sum())
    owner = np.concatenate((h[:n_out], t[n_out:])).astype(np.int64)
    other = np.concatenate((t[:n_out], h[n_out:])).astype(np.int64)
    return owner, other


@dataclass(frozen=True, slots=True)
class HubLists:
    """``degree[v]``: edges touching ``v`` (both directions); ``hubs``: the nodes with more than ``cap``
    of them, ascending; ``capN(hubs[i])`` is ``nbr[ptr[i]:ptr[i + 1]]``, sorted by ``(degree, id)``."""

    cap: int
    degree: I64
    hubs: I64
    ptr: I64
    nbr: I64

    def hub_row(self) -> I64:
        """``row[v]``: the position of ``v`` in ``hubs``, or -1."""
        row = np.full(self.degree.size, -1, dtype=np.int64)
        row[self.hubs] = np.arange(self.hubs.size, dtype=np.int64)
        return row


def hub_lists(kg: ArrayGraph, cap: int) -> HubLists:
    """Every node's degree and every hub's ``capN`` (see the module docstring)."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    n = kg.num_nodes
    degree: I64 = kg.degree(np.arange(n, dtype=np.int64), "both").astype(np.int64)
    hubs = np.flatnonzero(degree > cap).astype(np.int64)
    owner, other = split_incident(kg, hubs) if hubs.size else (np.empty(0, np.int64),) * 2
    return _capped(cap, degree, hubs, owner, other)


def edge_hub_lists(num_nodes: int, heads: npt.ArrayLike, tails: npt.ArrayLike, cap: int) -> HubLists:
    """:func:`hub_lists` of the graph whose (deduplicated) edges are ``heads[i] -> tails[i]`` over nodes
    ``0 … num_nodes - 1`` (an RDF source counted while it streams, :mod:`kgwise.kg.label_index`)."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    h = np.asarray(heads, dtype=np.int64).reshape(-1)
    t = np.asarray(tails, dtype=np.int64).reshape(-1)
    if h.size != t.size or (h.size and (min(int(h.min()), int(t.min())) < 0
                                        or max(int(h.max()), int(t.max())) >= num_nodes)):
        raise ValueError(f"heads and tails must be equally long ids in 0..{num_nodes - 1}")
    degree = (np.bincount(h, minlength=num_nodes) + np.bincount(t, minlength=num_nodes)).astype(np.int64)
    hubs = np.flatnonzero(degree > cap).astype(np.int64)
    is_hub = degree > cap
    out, inn = is_hub[h], is_hub[t]
    owner = np.concatenate((h[out], t[inn]))
    other = np.concatenate((t[out], h[inn]))
    return _capped(cap, degree, hubs, owner, other)


def _capped(cap: int, degree: I64, hubs: I64, owner: I64, other: I64) -> HubLists:
    """The hub lists from every ``(owner hub, neighbour)`` incidence (repeats and self-loops allowed)."""
    hub_row = np.full(degree.size, -1, dtype=np.int64)
    hub_row[hubs] = np.arange(hubs.size, dtype=np.int64)
    keep = owner != other
    row, other = hub_row[owner[keep]], other[keep]
    order = np.lexsort((other, degree[other], row))
    row, other = row[order], other[order]
    if row.size:  # drop repeated (row, neighbour): equal pairs are adjacent after the sort
        first = np.ones(row.size, dtype=bool)
        first[1:] = (row[1:] != row[:-1]) | (other[1:] != other[:-1])
        row, other = row[first], other[first]
    starts = np.searchsorted(row, np.arange(hubs.size, dtype=np.int64))
    rank = np.arange(row.size, dtype=np.int64) - starts[row] if row.size else row
    take = rank < cap
    row, other = row[take], other[take]
    ptr = np.zeros(hubs.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=hubs.size), out=ptr[1:])
    return HubLists(cap, degree, hubs, ptr, other)
