"""The SQLite label index: built from a graph file or an N-Triples dump, exact and fuzzy lookups, the
content-hash check, and grounding over it (in memory and, in tests/bench, behind Virtuoso)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import ConfigError, DataError
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder, GrounderConfig
from kgwise.kg.label_index import LabelIndex, build_index, graph_content_hash
from kgwise.kg.linking import LinkingConfig
from kgwise.kg.loaders.ntriples import write_ntriples
from kgwise.types import make_question


def _graph() -> CSRGraph:
    return CSRGraph.from_triples(
        [("Thyroxine", "may treat", "Hypothyroidism"), ("Aspirin", "may treat", "Gout"),
         ("Gout", "isa", "arthritis"), ("new york city", "isa", "city")],
        aliases={"Thyroxine": ["Levothyroxine"], "Gout": ["podagra"]})


def test_index_of_a_graph_file_grounds_like_the_graph(tmp_path: Path) -> None:
    g = _graph()
    path = g.save(tmp_path / "g.npz")
    built = build_index(path, tmp_path / "g.idx")
    assert (built.nodes, built.names, built.kind) == (g.num_nodes, g.num_nodes + 2, "graph")
    assert built.content_hash == graph_content_hash(g)
    idx = LabelIndex(built.path)
    assert idx.lookup("levothyroxine") == (g.node("Thyroxine"), True)
    assert idx.lookup("gout") == (g.node("Gout"), False)
    assert idx.lookup("nothing") is None
    assert idx.longest == 3 and "york" in idx.words and "zebra" not in idx.words
    assert [(g.label(v), round(s, 2)) for v, _, s in idx.fuzzy("aspirn", 2, 0.7)] == [("Aspirin", 0.86)]
    assert idx.suggest("gowt") == ["Gout"]
    cfg = GrounderConfig(linking=LinkingConfig())
    on_disk = Grounder(g, cfg, idx.bind(g))
    in_memory = Grounder(g, cfg)
    q = make_question("Can levothyroxine in new york city treat hypothyroidism?", ["aspirn", "podagra", "x"])
    assert on_disk.ground(q) == in_memory.ground(q)
    assert [x.method for x in on_disk.ground(q).links] == [x.method for x in in_memory.ground(q).links]


def test_an_index_of_another_graph_is_refused(tmp_path: Path) -> None:
    built = build_index(_graph().save(tmp_path / "g.npz"), tmp_path / "g.idx")
    other = CSRGraph.from_triples([("Aspirin", "may treat", "Headache")])
    with pytest.raises(ConfigError, match="another graph"):
        LabelIndex(built.path).bind(other)
    (tmp_path / "bad.idx").write_text("not sqlite", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.idx"):
        LabelIndex(tmp_path / "bad.idx")
    with pytest.raises(DataError, match="not found"):
        LabelIndex(tmp_path / "missing.idx")


def test_index_of_an_ntriples_dump_keeps_iris_and_aliases(tmp_path: Path) -> None:
    g = _graph()
    nt = write_ntriples(g, tmp_path / "g.nt")
    built = build_index(f"nt:{nt}", tmp_path / "d.idx")
    assert (built.kind, built.nodes) == ("rdf", g.num_nodes)
    idx = LabelIndex(built.path)
    hit = idx.lookup("levothyroxine")
    assert hit is not None and hit[1] and idx.label(hit[0]) == "Thyroxine"
    assert idx.term(hit[0]) == f"urn:kgwise:node:{g.node('Thyroxine')}"
    with pytest.raises(ConfigError, match="RDF"):
        idx.bind(g)  # a dump's index serves the store it was loaded into, not a graph file
    nt.write_text("<a> <b> broken\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"g.nt:1"):
        build_index(f"nt:{nt}", tmp_path / "e.idx")
    assert not (tmp_path / "e.idx").exists() and not (tmp_path / "e.idx.tmp").exists()


def test_index_of_a_graph_file_keeps_degrees_hub_lists_and_probe_nodes(tmp_path: Path) -> None:
    import json

    import numpy as np

    from kgwise.kg.hubs import hub_lists
    from kgwise.kg.label_index import HUB_CAP, PROBE_NODES

    leaves = [(f"leaf {i}", "r", f"tip {i % 7}") for i in range(HUB_CAP + 20)]
    g = CSRGraph.from_triples([("centre", "r", f"leaf {i}") for i in range(HUB_CAP + 20)] + leaves)
    idx = LabelIndex(build_index(g.save(tmp_path / "star.npz"), tmp_path / "star.idx").path)
    assert idx.hub_cap == HUB_CAP
    bound = idx.bind(g)
    nodes = list(range(g.num_nodes))
    assert bound.degree_of(nodes).tolist() == g.degree(np.arange(g.num_nodes), "both").tolist()
    want = hub_lists(g, HUB_CAP)
    row = want.hub_row()
    for v in want.hubs.tolist():
        got = bound.hub_neighbours(v)
        assert got is not None and got.tolist() == want.nbr[want.ptr[row[v]]:want.ptr[row[v] + 1]].tolist()
    assert bound.hub_neighbours(g.node("leaf 3")) is None
    probe = json.loads(idx.meta["probe"])
    assert len(probe) == PROBE_NODES and probe[0][:2] == ["urn:kgwise:node:0", "centre"]
    assert probe[0][2] == HUB_CAP + 20  # distinct neighbours, which an endpoint must match
    # a dump of the graph gives the same statistics, counted while it streams
    dump = LabelIndex(build_index(f"nt:{write_ntriples(g, tmp_path / 's.nt')}", tmp_path / "d.idx").path)
    assert dump.hub_cap == HUB_CAP
    rows = dump.rows(range(g.num_nodes))
    assert {term: d for _, term, d in rows.values()} == {
        f"urn:kgwise:node:{v}": int(d) for v, d in enumerate(want.degree.tolist())}
    for v in want.hubs.tolist():
        i = dump.nodes_of_terms([f"urn:kgwise:node:{v}"])[f"urn:kgwise:node:{v}"]
        got = dump.hub(i)
        assert got is not None and [rows[x][1] for x in got.tolist()] == [
            f"urn:kgwise:node:{x}" for x in want.nbr[want.ptr[row[v]]:want.ptr[row[v] + 1]].tolist()]


def test_a_dump_counts_edges_to_unnamed_iris_and_literals_but_not_blank_nodes(tmp_path: Path) -> None:
    from kgwise.kg.label_index import HUB_CAP

    label = "<http://www.w3.org/2000/01/rdf-schema#label>"
    lines = [f'<urn:hub> {label} "hub" .', f'<urn:lit> {label} "lit" .']
    lines += [f"<urn:hub> <urn:r> <urn:x{i}> ." for i in range(HUB_CAP + 1)]  # unnamed IRIs
    lines += ["<urn:hub> <urn:r> <urn:x0> .", "<urn:hub> <urn:r> _:b .", "_:b <urn:r> <urn:hub> ."]
    lines += [f'<urn:lit> <urn:size> "{i}" .' for i in range(HUB_CAP + 1)]  # literal neighbours
    lines += [f"<urn:x{i}> <urn:r> <urn:x{i + 1}> ." for i in range(3)]
    (tmp_path / "d.nt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    built = build_index(f"nt:{tmp_path / 'd.nt'}", tmp_path / "d.idx")
    assert (built.nodes, built.names) == (2 + HUB_CAP + 1, 2)  # the unnamed IRIs have nothing to ground to
    idx = LabelIndex(built.path)
    ids = idx.nodes_of_terms(["urn:hub", "urn:lit", "urn:x0", "urn:x1"])
    rows = idx.rows(ids.values())
    # a repeated triple is one edge; the blank node's edges are no edges
    assert [rows[ids[t]][2] for t in ("urn:hub", "urn:lit", "urn:x0", "urn:x1")] == [HUB_CAP + 1, HUB_CAP + 1,
                                                                                      2, 3]
    assert rows[ids["urn:x1"]][0] == "x1" and idx.lookup("x1") is None
    hub = idx.hub(ids["urn:hub"])
    terms = idx.rows(hub.tolist()) if hub is not None else {}
    # degree 1 first (x4 … x100), then degree 2 (x0, x3), then degree 3 by index id (x1, not x2): the cap
    assert hub is not None and [terms[v][1] for v in hub.tolist()] == [
        *(f"urn:x{i}" for i in range(4, HUB_CAP + 1)), "urn:x0", "urn:x3", "urn:x1"]
    assert idx.hub(ids["urn:lit"]) is None  # its list would hold literals: P_sub reads it from the graph
