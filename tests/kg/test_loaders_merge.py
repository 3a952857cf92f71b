"""merge_graphs and load_graph: unification by normalised label, on random graphs and real KGs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.kg import CSRGraph, normalise_label
from kgwise.kg.loaders import load_graph, merge_graphs

LABELS = ["dog", "Dog", "hot_dog", "hot dog", "cat", " cat ", "bank", "Bank  Note", "bank note"]
triple = st.tuples(st.sampled_from(LABELS), st.sampled_from(["isa", "partof", "IsA"]),
                   st.sampled_from(LABELS))


def norm_triples(g: CSRGraph) -> set[tuple[str, str, str]]:
    return {(normalise_label(t.head), t.relation, normalise_label(t.tail)) for t in g.triples(*g.all_edges())}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(triple, max_size=12), min_size=1, max_size=4))
def test_merge_is_union_of_normalised_triples(parts: list[list[tuple[str, str, str]]]) -> None:
    graphs = [CSRGraph.from_triples(p, name=f"g{i}") for i, p in enumerate(parts)]
    merged = merge_graphs(graphs)
    expected: set[tuple[str, str, str]] = set()
    for g in graphs:
        expected |= norm_triples(g)
    assert norm_triples(merged) == expected
    assert merged.num_edges == len(expected)
    keys = [normalise_label(lab) for lab in merged.labels]
    assert len(keys) == len(set(keys))  # one node per normalised label
    assert set(keys) == {normalise_label(lab) for g in graphs for lab in g.labels}


def test_merge_keeps_first_label_and_text() -> None:
    a = CSRGraph.from_triples([("Hot_Dog", "isa", "food")], name="a")
    b = CSRGraph.from_triples([("hot dog", "atlocation", "stand")], texts={"hot dog": "a sausage"}, name="b")
    m = merge_graphs([a, b])
    v = m.node("hot dog")
    assert m.label(v) == "Hot_Dog" and m.text(v) == "a sausage"
    assert m.name == "a+b" and m.num_nodes == 3 and m.num_relations == 2
    with pytest.raises(ValueError, match="at least one"):
        merge_graphs([])


def test_wordnet_plus_conceptnet_slice(data_dir: Path, tmp_path: Path) -> None:
    merge_file = data_dir / "conceptnet" / "merge_relation_kagnet.txt"
    wn = load_graph(data_dir / "wordnet", "wordnet")
    slice_dir = data_dir / "conceptnet" / "csqa_choice_triples_jessionlin"
    cn = load_graph(slice_dir, "conceptnet-slice", merge_file)
    m = merge_graphs([wn, cn])
    shared = {normalise_label(x) for x in wn.labels} & {normalise_label(x) for x in cn.labels}
    assert m.num_nodes == wn.num_nodes + cn.num_nodes - len(shared)
    # only ``antonym`` is a relation name of both; ConceptNet antonyms WordNet also has collapse into one edge
    assert set(wn.relations) & set(cn.relations) == {"antonym"}
    h, r, t = wn.all_edges()
    anto = r == wn.relation_id("antonym")
    wn_antonyms = {(normalise_label(x.head), x.relation, normalise_label(x.tail))
                   for x in wn.triples(h[anto], r[anto], t[anto])}
    overlap = norm_triples(cn) & wn_antonyms
    assert ("active", "antonym", "inactive") in overlap
    assert m.num_edges == wn.num_edges + cn.num_edges - len(overlap)
    door = m.node("revolving door")
    tails = {m.label(t) for t in m.out_edges(door)[1].tolist()}
    assert {"revolving_door.n.01", "bank", "mall"} <= tails
    assert m.text(m.node("dog.n.01")).startswith("a member of the genus Canis")
    again = CSRGraph.load(m.save(tmp_path / "wn_cn.npz"))
    assert again.num_edges == m.num_edges and list(again.labels) == list(m.labels)


def test_load_graph_errors(data_dir: Path) -> None:
    with pytest.raises(ConfigError, match="unknown KG format"):
        load_graph(data_dir / "ddb", "csv")
    with pytest.raises(ConfigError, match="ConceptNet"):
        load_graph(data_dir / "ddb", "ddb", merge_file=data_dir / "conceptnet" / "merge_relation_kagnet.txt")
    g = load_graph(data_dir / "webqsp" / "freebase_fragment.tsv", "tsv")
    assert g.num_edges == 46_040
