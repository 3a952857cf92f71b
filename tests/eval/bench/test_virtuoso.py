"""Virtuoso on loopback (started by a fixture on free ports with a temporary database): the WebQSP Freebase
fragment bulk-loaded from `kgwise kg export`'s N-Triples, read back like the local graph, a label index
built over the endpoint (paged), grounding and P_sub over it, and the errors of a bad endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kgwise.errors import ConfigError
from kgwise.eval.bench.grounding import endpoint_psub
from kgwise.eval.bench.virtuoso import GRAPH_IRI, Virtuoso, virtuoso_binaries
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder, GrounderConfig
from kgwise.kg.label_index import LabelIndex, build_index
from kgwise.kg.linking import LinkingConfig
from kgwise.kg.loaders import load_tsv
from kgwise.kg.loaders.ntriples import write_ntriples
from kgwise.kg.sparql import RDFS_LABEL, SPARQLConfig, SPARQLError, SPARQLGraph
from kgwise.retry import RetryPolicy
from kgwise.types import make_question

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def freebase(data_dir: Path) -> CSRGraph:
    return load_tsv(data_dir / "webqsp" / "freebase_fragment.tsv")


@pytest.fixture(scope="module")
def virtuoso(freebase: CSRGraph, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh Virtuoso serving the fragment; skipped only when the binaries are not installed."""
    if virtuoso_binaries() is None:
        pytest.skip("virtuoso-t / isql-vt not installed (.ci/install installs virtuoso-opensource)")
    root = tmp_path_factory.mktemp("virtuoso")
    nt = write_ntriples(freebase, root / "freebase.nt")
    with Virtuoso(root / "db", memory_mb=256) as server:
        server.bulk_load([nt])
        yield f"{server.endpoint}?default-graph-uri={GRAPH_IRI}"


def test_bulk_loaded_virtuoso_serves_the_graph(virtuoso: str, freebase: CSRGraph) -> None:
    remote = SPARQLGraph(virtuoso)
    assert remote.num_edges == freebase.num_edges
    labelled = remote.select(f"SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {{ ?s <{RDFS_LABEL}> ?l . "
                             "FILTER(isIRI(?s) && isLiteral(?l)) }")
    assert int(labelled[0]["n"]["value"]) == freebase.num_nodes  # every node kept its name
    v, w = freebase.find("Jamaica"), remote.find("Jamaica")
    assert v is not None and w is not None and remote.label(w) == "Jamaica"
    assert (sorted(freebase.label(int(x)) for x in freebase.neighbors([v]))
            == sorted(remote.label(int(x)) for x in remote.neighbors([w])))


def test_label_index_over_the_endpoint_grounds_questions(virtuoso: str, freebase: CSRGraph,
                                                         tmp_path: Path) -> None:
    built = build_index(f"sparql:{virtuoso}", tmp_path / "fb.idx", page=5000)
    assert (built.kind, built.nodes) == ("rdf", freebase.num_nodes)
    remote = SPARQLGraph(virtuoso)
    index = LabelIndex(built.path).bind(remote)
    grounder = Grounder(remote, GrounderConfig(linking=LinkingConfig()), index)
    topics = grounder.topic_entities("what country is jamaica in")
    assert "Jamaica" in [remote.label(x.node) for x in topics]
    typo = grounder.topic_entities("jamaika")
    assert [remote.label(x.node) for x in typo] == ["Jamaica"] and typo[0].method == "fuzzy"
    g = grounder.ground(make_question("what currency does jamaica use", ["Jamaican dollar", "Euro"]))
    # P_sub with the hub statistics of an index of the graph file the store was loaded from
    from_file = build_index(freebase.save(tmp_path / "fb.npz"), tmp_path / "file.idx")
    stats = LabelIndex(from_file.path).bind(remote)
    sent_before = remote.usage()["requests"]
    nodes = endpoint_psub(remote, stats, g)
    assert g.question_nodes and len(nodes) > len(g.question_nodes)
    assert remote.usage()["requests"] - sent_before <= 8  # batched VALUES queries, not one per node
    other = CSRGraph.from_triples([("a", "r", "b")]).save(tmp_path / "o.npz")
    with pytest.raises(ConfigError, match="another graph"):
        LabelIndex(build_index(other, tmp_path / "o.idx").path).bind(remote)


def test_a_down_endpoint_fails_clearly_after_retries() -> None:
    fast = SPARQLConfig(retry=RetryPolicy(max_retries=1, base_delay_s=0.0, timeout_s=2.0))
    dead = SPARQLGraph("http://127.0.0.1:9/sparql", fast)
    with pytest.raises(SPARQLError, match=r"127\.0\.0\.1:9"):
        dead.find("Jamaica")
    assert dead.usage()["retries"] == 1
