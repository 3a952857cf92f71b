"""The throw-away Oxigraph store of the grounding benchmark: bulk-loaded from `kgwise kg export`'s
N-Triples, served read-only on loopback, read back like the graph file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import ServiceError
from kgwise.eval.bench.oxigraph import Oxigraph, oxigraph_binary
from kgwise.kg import CSRGraph
from kgwise.kg.loaders.ntriples import write_ntriples
from kgwise.kg.sparql import SPARQLGraph


def test_oxigraph_loads_and_serves_an_export(tmp_path: Path) -> None:
    assert oxigraph_binary() is not None, "install the dev extras (oxigraph)"
    g = CSRGraph.from_triples([("Jamaica", "currency", "Jamaican dollar"), ("Jamaica", "in", "Caribbean")])
    store = Oxigraph(tmp_path / "db")
    assert store.load([write_ntriples(g, tmp_path / "g.nt")]) > 0
    with store:
        remote = SPARQLGraph(store.endpoint)
        v = remote.find("Jamaica")
        assert v is not None
        assert sorted(remote.label(int(x)) for x in remote.neighbors([v])) == ["Caribbean", "Jamaican dollar"]
    assert store.proc is None
    (tmp_path / "bad.nt").write_text("<a> <b> broken\n", encoding="utf-8")
    with pytest.raises(ServiceError, match=r"bad\.nt"):
        Oxigraph(tmp_path / "db2").load([tmp_path / "bad.nt"])
