"""Knowledge-graph loaders: each reads one source format into a ``CSRGraph``.

``load_graph(source, format)`` dispatches on the format names used by ``kgwise kg build``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kgwise.errors import ConfigError, DataError
from kgwise.kg.clean import BuildReport
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders.conceptnet import (
    concept_label,
    load_conceptnet_csv,
    load_conceptnet_jsonl_triples,
    read_merge_file,
)
from kgwise.kg.loaders.ddb import DDB_RELATIONS, ddb_synonyms, load_ddb
from kgwise.kg.loaders.merge import merge_graphs
from kgwise.kg.loaders.ntriples import load_ntriples
from kgwise.kg.loaders.rog import is_rog_source, load_rog_graph
from kgwise.kg.loaders.tsv import load_tsv, read_alias_file
from kgwise.kg.loaders.wordnet import IN_SYNSET, POINTER_RELATIONS, SENSES, load_wordnet

__all__ = [
    "DDB_RELATIONS",
    "FORMATS",
    "IN_SYNSET",
    "POINTER_RELATIONS",
    "SENSES",
    "concept_label",
    "ddb_synonyms",
    "load_conceptnet_csv",
    "load_conceptnet_jsonl_triples",
    "load_ddb",
    "load_graph",
    "load_ntriples",
    "load_rog_graph",
    "load_tsv",
    "load_wordnet",
    "merge_graphs",
    "open_graph_file",
    "read_alias_file",
    "read_merge_file",
]

FORMATS: dict[str, str] = {
    "conceptnet-csv": "official ConceptNet 5 assertions CSV (.csv or .csv.gz)",
    "conceptnet-slice": "CSQA choice-triple JSON files (a file or a directory of them)",
    "ddb": "directory with ddb_names.json and ddb_relas.json",
    "wordnet": "WordNet 3.0 database directory (data.*, index.*)",
    "tsv": "head<TAB>relation<TAB>tail file",
    "ntriples": "N-Triples file (.nt or .nt.gz)",
    "rog": "RoG KGQA records, the union of their per-question subgraphs: a .parquet shard, a directory of "
           "shards, or .jsonl",
}
"""Format name → what its source is."""


def load_graph(
    source: str | Path, format: str, merge_file: str | Path | None = None, wordnet_senses: str = "all",
    aliases: str | Path | None = None, report: BuildReport | None = None,
) -> CSRGraph:
    """Load ``source`` in ``format`` (a key of ``FORMATS``). ``merge_file`` (a KagNet relation-merging
    file) applies to the two ConceptNet formats only, ``wordnet_senses`` (``all`` or ``frequent``, see
    :func:`load_wordnet`) to WordNet only, ``aliases`` (``label<TAB>alias`` lines) to TSV
    only; ``report`` (TSV only) collects broken lines, duplicates, self-loops and alias findings instead
    of raising on them (:mod:`kgwise.kg.loaders.tsv`). Raises ``ConfigError`` for an unknown format or a
    misplaced option and ``DataError`` for a source without a single triple."""
    loaders: dict[str, Callable[[Path], CSRGraph]] = {
        "conceptnet-csv": lambda p: load_conceptnet_csv(p, merge_file),
        "conceptnet-slice": lambda p: load_conceptnet_jsonl_triples(p, merge_file),
        "ddb": load_ddb,
        "wordnet": lambda p: load_wordnet(p, senses=wordnet_senses),
        "tsv": lambda p: load_tsv(p, aliases=aliases, report=report),
        "ntriples": load_ntriples,
        "rog": load_rog_graph,
    }
    if format not in loaders:
        raise ConfigError(f"unknown KG format {format!r}; choose one of {', '.join(FORMATS)}")
    if merge_file is not None and not format.startswith("conceptnet"):
        raise ConfigError(f"a relation merge file applies to ConceptNet formats, not {format!r}")
    if aliases is not None and format != "tsv":
        raise ConfigError(f"an alias file applies to the tsv format ({format!r} sources carry their own "
                          "names)")
    if wordnet_senses not in SENSES:
        raise ConfigError(f"WordNet senses must be {' or '.join(map(repr, SENSES))}, got {wordnet_senses!r}")
    if wordnet_senses != "all" and format != "wordnet":
        raise ConfigError(f"WordNet senses apply to the wordnet format, not {format!r}")
    return _with_edges(loaders[format](Path(source)), source, format)


def _with_edges(graph: CSRGraph, source: str | Path, format: str) -> CSRGraph:
    if graph.num_edges == 0:
        raise DataError(f"no triples found (read as {format})", source)
    return graph


def open_graph_file(path: str | Path) -> CSRGraph:
    """A built graph (``.npz``, ``kgwise kg build``), a triple file (``.tsv``, ``.nt``, ``.nt.gz``) or RoG
    KGQA data (``.parquet``, a directory of shards, or ``.jsonl`` with RoG's fields: the union of the
    per-question subgraphs); ``ConfigError`` for anything else."""
    p = Path(path)
    if p.is_dir() and not is_rog_source(p):
        raise ConfigError(f"{p}: a directory without RoG '*.parquet' shards; a KG in another layout (ddb, "
                          "wordnet, conceptnet) is built into a graph file first: `kgwise kg build`")
    if p.suffix == ".parquet" or p.is_dir() or (p.suffix == ".jsonl" and is_rog_source(p)):
        return load_rog_graph(p)
    if p.suffix == ".npz":
        return CSRGraph.load(p)
    if p.name.endswith((".tsv", ".tsv.gz")):
        return _with_edges(load_tsv(p), p, "tsv")
    if p.name.endswith((".nt", ".nt.gz")):
        return _with_edges(load_ntriples(p), p, "ntriples")
    if p.suffix == ".jsonl":
        raise ConfigError(f"{p}: a .jsonl file whose records lack RoG's q_entity and graph fields: "
                          "not a graph")
    raise ConfigError(f"{p}: expected a .npz graph, a .tsv / .nt triple file or RoG data (.parquet, .jsonl)")
