"""Open a KG by its spec: a graph file, or a SPARQL endpoint."""

from __future__ import annotations

from pathlib import Path

from kgwise.kg.base import KnowledgeGraph

__all__ = ["GRAPH_FILE_HELP", "GRAPH_SPEC_HELP", "graph_stamp", "is_endpoint", "open_graph"]

GRAPH_FILE_HELP = ("a .npz from `kgwise kg build` (fastest to open), a .tsv of head<TAB>relation<TAB>tail "
                   "lines, N-Triples (.nt, .nt.gz), or RoG KGQA data (.parquet shards, or .jsonl)")
GRAPH_SPEC_HELP = GRAPH_FILE_HELP + ", or a SPARQL endpoint (sparql:URL, or an http(s) URL)"


def is_endpoint(spec: str | Path) -> bool:
    """Whether ``spec`` names a SPARQL endpoint rather than a file."""
    return isinstance(spec, str) and spec.startswith(("sparql:", "http://", "https://"))


def open_graph(spec: str | Path) -> KnowledgeGraph:
    """The KG ``spec`` names (see :data:`GRAPH_SPEC_HELP`)."""
    if is_endpoint(spec):
        from kgwise.kg.sparql import SPARQLGraph

        url = str(spec)
        return SPARQLGraph(url.removeprefix("sparql:"))
    from kgwise.kg.loaders import open_graph_file

    return open_graph_file(spec)


def graph_stamp(spec: str | Path) -> object:
    """What identifies the graph's content for a cache key: a file's stamp (path, size, mtime), or an
    endpoint's URL (its data may change behind it)."""
    from kgwise.files import file_stamp

    return str(spec) if is_endpoint(spec) else file_stamp(Path(spec))
