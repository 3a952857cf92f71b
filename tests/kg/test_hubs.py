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
