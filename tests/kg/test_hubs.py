"""Degrees and hub lists (the statistics P_sub's hub rule ranks by), computed once for a whole graph."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.kg import CSRGraph
from kgwise.kg.hubs import hub_lists


def test_hub_lists_keep_the_lowest_degree_neighbours_of_each_hub() -> None:
    # hub: 4 neighbours (one twice); with a cap of 2 it keeps the two of lowest (degree, id)
    g = CSRGraph.from_triples([("hub", "r", "a"), ("hub", "s", "a"), ("b", "r", "hub"), ("hub", "r", "c"),
                               ("hub", "r", "d"), ("c", "r", "x"), ("d", "r", "x"), ("d", "r", "y")])
    lists = hub_lists(g, 2)
    assert lists.degree.tolist() == g.degree(np.arange(g.num_nodes), "both").tolist()
    assert [g.label(int(v)) for v in lists.hubs] == ["hub", "d"]  # more than 2 incident edges
    row = lists.hub_row()
    hub = g.node("hub")
    kept = lists.nbr[lists.ptr[row[hub]]:lists.ptr[row[hub] + 1]]
    assert [g.label(int(v)) for v in kept] == ["b", "a"]  # degree 1, then degree 2 with the lower id
    assert row[g.node("a")] == -1
    with pytest.raises(ValueError, match="cap"):
        hub_lists(g, 0)


def test_edge_hub_lists_equal_hub_lists_of_the_graph() -> None:
    from kgwise.kg.hubs import edge_hub_lists

    rng = np.random.default_rng(3)
    h = rng.integers(0, 40, 400) ** 2 // 40  # skewed: a few hubs
    t = rng.integers(0, 40, 400)
    g = CSRGraph.from_triples([(f"n{a}", "r", f"n{b}") for a, b in zip(h.tolist(), t.tolist(), strict=True)])
    hh, _, tt = g.all_edges()
    for cap in (1, 3, 10):
        want, got = hub_lists(g, cap), edge_hub_lists(g.num_nodes, hh, tt, cap)
        for field in ("degree", "hubs", "ptr", "nbr"):
            assert getattr(want, field).tolist() == getattr(got, field).tolist()
    with pytest.raises(ValueError, match=r"0\.\.1"):
        edge_hub_lists(2, [0, 5], [1, 1], 3)
