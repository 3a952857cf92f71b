"""N-Triples loader on a sample in the W3C RDF 1.1 N-Triples syntax."""

# ruff: noqa: E501  (N-Triples lines are long by nature)

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import DataError
from kgwise.kg.loaders import load_ntriples
from kgwise.kg.loaders.ntriples import iri_local_name, parse_ntriples_line

RDFS = "http://www.w3.org/2000/01/rdf-schema#"
SAMPLE = f"""# a comment line
<http://example.org/show/218> <{RDFS}label> "That Seventies Show"^^<http://www.w3.org/2001/XMLSchema#string> .
<http://example.org/show/218> <{RDFS}label> "Cette S\\u00E9rie des Ann\\u00E9es Septante"@fr-be .
<http://example.org/show/218> <http://example.org/show/localName> "That Seventies Show"@en .
<http://example.org/show/218> <http://xmlns.com/foaf/0.1/name> "Line\\tone\\nline \\"two\\""  .
<http://example.org/show/218> <{RDFS}comment> "An American sitcom." .
<http://en.wikipedia.org/wiki/Helium> <http://example.org/elements/atomicNumber> "2"^^<http://www.w3.org/2001/XMLSchema#integer> .
_:alice <http://xmlns.com/foaf/0.1/knows> _:bob . # trailing comment
<http://dbpedia.org/resource/Caf%C3%A9_Society> <http://dbpedia.org/ontology/genre> <http://example.org/show/218> .

\t<http://example.org/a\\u0042c>\t<http://example.org/p>\t<http://example.org/x#y>\t.
"""


def test_parse_line_terms() -> None:
    s, p, o = parse_ntriples_line('<http://a/s> <http://a/p> "x\\\\y\\u00e9"@EN-gb .')  # type: ignore[misc]
    assert s == ("iri", "http://a/s", "", "") and p == "http://a/p"
    assert o == ("literal", "x\\yé", "en-gb", "")
    assert parse_ntriples_line("   # only a comment") is None
    assert parse_ntriples_line("") is None
    assert iri_local_name("http://dbpedia.org/resource/Caf%C3%A9_Society") == "Café Society"
    assert iri_local_name("http://example.org/x#y") == "y"
    assert iri_local_name("http://example.org/") == "http://example.org/"


def test_sample_graph(tmp_path: Path) -> None:
    path = tmp_path / "sample.nt"
    path.write_text(SAMPLE, encoding="utf-8")
    g = load_ntriples(path)
    edges = {(t.head, t.relation, t.tail) for t in g.triples(*g.all_edges())}
    show = "That Seventies Show"  # the untagged rdfs:label wins over the French one
    assert edges == {
        (show, "localName", "That Seventies Show"),  # the @en literal object is its own node
        (show, "name", 'Line\tone\nline "two"'),
        ("Helium", "atomicNumber", "2"),
        ("_:alice", "knows", "_:bob"),
        ("Café Society", "genre", show),
        ("aBc", "p", "y"),
    }
    assert g.num_nodes == 10 and g.num_edges == 6
    assert g.text(g.node(show)) == "An American sitcom."
    # an IRI node and the equal-looking literal node are distinct
    assert sum(1 for lab in g.labels if lab == show) == 2


@pytest.mark.parametrize(
    "bad",
    [
        "<http://a/s> <http://a/p> <http://a/o>",  # no final dot
        '<http://a/s> <http://a/p> "unterminated .',
        '"literal" <http://a/p> <http://a/o> .',  # literal subject
        "<http://a/s> _:p <http://a/o> .",  # blank-node predicate
        "<http://a b/s> <http://a/p> <http://a/o> .",  # space inside an IRI
        '<http://a/s> <http://a/p> "x"@ .',  # empty language tag
        '<http://a/s> <http://a/p> "bad \\q escape" .',
    ],
)
def test_malformed_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "bad.nt"
    path.write_text("# header\n<http://a/s> <http://a/p> <http://a/o> .\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_ntriples(path)
    assert err.value.path == str(path) and err.value.line == 3


def test_an_exported_graph_reads_back_as_the_same_graph(tmp_path: Path) -> None:
    """Relation names keep their underscores, so a calibration's graph hash still matches."""
    from kgwise.conformal.provenance import graph_fingerprint
    from kgwise.kg import CSRGraph
    from kgwise.kg.loaders.ntriples import write_ntriples

    g = CSRGraph.from_triples([("France", "has_capital", "Paris"), ("New_York", "in state", "New York"),
                               ("a%20b", "50%_off", "x/y#z")])
    back = load_ntriples(write_ntriples(g, tmp_path / "g.nt"))
    assert sorted(back.relations) == sorted(g.relations) == ["50%_off", "has_capital", "in state"]
    assert graph_fingerprint(back) == graph_fingerprint(g)
    assert iri_local_name("http://dbpedia.org/resource/Barack_Obama") == "Barack Obama"  # DBpedia's rule
    assert iri_local_name("urn:kgwise:relation:has%5Fcapital") == "has_capital"
