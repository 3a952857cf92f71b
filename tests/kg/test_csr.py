from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import DataError, UnknownNodeError
from kgwise.kg import CSRGraph, KnowledgeGraph


def _toy() -> CSRGraph:
    return CSRGraph.from_triples(
        [("dog", "isa", "animal"), ("cat", "isa", "animal"), ("dog", "atlocation", "house"),
         ("dog", "isa", "animal"), ("House", "partof", "town")],
        name="toy",
    )


def test_from_triples_interns_and_dedups() -> None:
    g = _toy()
    assert isinstance(g, KnowledgeGraph)
    assert (g.num_nodes, g.num_edges, g.num_relations) == (6, 4, 3)
    dog = g.node("Dog")
    rels, tails = g.out_edges(dog)
    assert sorted((g.relation_name(r), g.label(t)) for r, t in zip(rels, tails, strict=True)) == [
        ("atlocation", "house"), ("isa", "animal")]
    assert sorted(g.label(h) for h in g.in_edges(g.node("animal"))[1]) == ["cat", "dog"]
    assert g.find("no such thing") is None
    with pytest.raises(UnknownNodeError, match="no such thing"):
        g.node("no such thing")
    with pytest.raises(UnknownNodeError):
        g.out_edges(99)


def test_cache_round_trip(tmp_path: Path) -> None:
    g = CSRGraph.from_triples([("a", "r", "b"), ("b", "r", "ç")], texts={"a": "the letter a"}, name="t")
    path = g.save(tmp_path / "g.npz")
    h = CSRGraph.load(path)
    assert (h.name, list(h.labels), list(h.relations)) == ("t", ["a", "b", "ç"], ["r"])
    assert h.text(0) == "the letter a"
    for arrays_g, arrays_h in zip(g.all_edges(), h.all_edges(), strict=True):
        np.testing.assert_array_equal(arrays_g, arrays_h)


def test_load_rejects_missing_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        CSRGraph.load(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(DataError, match=r"bad\.npz: not a graph file written by `kgwise kg build`"):
        CSRGraph.load(bad)


edges_strategy = st.lists(st.tuples(st.integers(0, 14), st.integers(0, 3), st.integers(0, 14)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(edges_strategy, st.lists(st.integers(0, 14), min_size=1, max_size=6))
def test_vectorised_ops_match_brute_force(edges: list[tuple[int, int, int]], nodes: list[int]) -> None:
    g = CSRGraph.from_arrays([f"n{i}" for i in range(15)], ["r0", "r1", "r2", "r3"],
                             [e[0] for e in edges], [e[1] for e in edges], [e[2] for e in edges])
    unique = set(edges)
    assert g.num_edges == len(unique)
    s = set(nodes)
    want_out = {t for h, _, t in unique if h in s}
    want_in = {h for h, _, t in unique if t in s}
    assert set(g.neighbors(nodes, "out").tolist()) == want_out
    assert set(g.neighbors(nodes, "in").tolist()) == want_in
    assert set(g.neighbors(nodes).tolist()) == want_out | want_in
    among = set(zip(*(a.tolist() for a in g.edges_among(nodes)), strict=True))
    assert among == {e for e in unique if e[0] in s and e[2] in s}
    inc = set(zip(*(a.tolist() for a in g.incident(nodes)), strict=True))
    assert inc == {e for e in unique if e[0] in s or e[2] in s}
    want_degree = [sum(1 for e in unique if e[0] == v) for v in nodes]
    np.testing.assert_array_equal(g.degree(nodes, "out"), want_degree)


def test_find_prefers_the_exact_label() -> None:
    g = CSRGraph.from_triples([("same_label", "r", "Paris"), ("paris", "r", "same label")])
    assert g.find("same label") == g.labels.index("same label")
    assert g.find("same_label") == 0 and g.find("Paris") == 1 and g.find("paris") == 2
    assert g.find("PARIS ") == 1  # no exact spelling: the first that normalises alike
    assert g.find("Lyon") is None
