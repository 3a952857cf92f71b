"""A persistent label index for large KGs: every node name (labels and aliases) in one SQLite file.

Built once from a graph file, an N-Triples dump (streamed) or a SPARQL endpoint (paged queries), then
queried without loading the labels: exact phrase-key lookups hit a B-tree (``names(key)``), fuzzy lookups
draw candidates from an FTS5 trigram index (SQLite's ``trigram`` tokenizer, standard library ``sqlite3``)
and re-rank them by normalised Levenshtein similarity (:mod:`kgwise.kg.linking`). It implements the
grounder's :class:`~kgwise.kg.grounding.NameIndex`.

Each node is stored with its id in the source and its RDF term (an IRI; ``urn:kgwise:node:i`` for node
``i`` of a graph file, as ``kgwise kg export`` writes it), so an index of a graph file also serves the
endpoint its export was loaded into. The index records what it was built from: a content hash of a
graph file's graph, and for a dump or an endpoint the counts of edges and names; and 32 probe nodes spread
over the ids (label; for a graph file also distinct neighbours), which an endpoint must match (counting
every triple of a large store takes minutes). :meth:`LabelIndex.bind` refuses a graph that does not
match (another graph), as calibrations are refused.

An index also keeps the statistics P_sub's hub rule ranks by (:mod:`kgwise.kg.hubs`): every node's degree
and every hub's capped neighbour list (``hub_cap`` in the meta table), so that P_sub over the endpoint
the graph was loaded into reads only small edge lists (:meth:`BoundIndex.degree_of`,
:meth:`BoundIndex.hub_neighbours`). A graph file's come from its CSR arrays; a dump's are counted while it
streams; an endpoint's only on request (``hub_stats``: a walk from the named IRIs reads every edge P_sub
can reach, a batch of nodes per query).
Of an RDF source, the index also holds the IRIs that end an edge without a name (as nodes with nothing to
ground to), and a hub whose list holds a literal keeps no list (P_sub reads that hub from the endpoint).

The file is built in memory (journal and sync off, one transaction), its FTS5 index merged into one
segment (``optimize``), then written out in one pass (``VACUUM INTO``: about 2 % of the build's CPU) and
renamed into place.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
import time
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError, DataError
from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.linking import fuzzy_scores
from kgwise.kg.text import common_words, is_acronym, phrase_key, phrase_keys, stopwords

if TYPE_CHECKING:
    from kgwise.kg.csr import CSRGraph
    from kgwise.kg.sparql import SPARQLGraph

__all__ = ["INDEX_VERSION", "BoundIndex", "IndexBuild", "LabelIndex", "build_index", "graph_content_hash",
           "open_index"]

INDEX_VERSION = 2
HUB_CAP = 100
"""The hub rule's cap the statistics are built for (P_sub's default ``max_expand``)."""
EXPORT_BASE = "urn:kgwise:node:"
_BATCH = 50_000
PROBE_NODES = 32
"""Nodes (evenly spread over the ids) whose labels and neighbour counts an endpoint must match."""
_IN_BATCH = 900  # host parameters per IN (...) query (SQLite's limit is 999 before 3.32)


def graph_content_hash(kg: CSRGraph) -> str:
    """SHA-256 of a graph's labels, aliases, relation names and edges (the same graph rebuilt from another
    file gives the same value)."""
    digest = hashlib.sha256()
    alias_nodes, alias_names = kg.alias_pairs()
    for names in (kg.labels, kg.relations, alias_names):
        digest.update("\n".join(names).encode("utf-8") + b"\0")
    digest.update(np.ascontiguousarray(alias_nodes, dtype=np.int64).tobytes())
    for column in kg.all_edges():
        digest.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True, slots=True)
class IndexBuild:
    """What a build wrote: names and nodes indexed, seconds taken, and the source's identity."""

    path: Path
    nodes: int
    names: int
    seconds: float
    source: str
    kind: str
    content_hash: str


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE nodes (node INTEGER PRIMARY KEY, label TEXT NOT NULL, term TEXT NOT NULL, degree INTEGER);
CREATE TABLE hubs (node INTEGER PRIMARY KEY, nbrs BLOB NOT NULL);
CREATE TABLE names (id INTEGER PRIMARY KEY, key TEXT NOT NULL, node INTEGER NOT NULL, name TEXT NOT NULL,
                    alias INTEGER NOT NULL);
CREATE TABLE words (word TEXT PRIMARY KEY) WITHOUT ROWID;
"""
_FTS_HASH_BYTES = 64 * 2**20
_FINISH = f"""
CREATE INDEX names_key ON names(key, alias, node);
CREATE INDEX nodes_term ON nodes(term);
CREATE VIRTUAL TABLE names_fts USING fts5(key, content='names', content_rowid='id', tokenize='trigram');
INSERT INTO names_fts(names_fts, rank) VALUES ('automerge', 0);
INSERT INTO names_fts(names_fts, rank) VALUES ('hashsize', {_FTS_HASH_BYTES});
INSERT INTO names_fts(names_fts) VALUES ('rebuild');
INSERT INTO names_fts(names_fts) VALUES ('optimize');
INSERT INTO names_fts(names_fts, rank) VALUES ('automerge', 4);
"""
"""Indexes made once every row is in. FTS5 tokenises (``rebuild``) with incremental merging off and a
larger pending-terms buffer, then merges every segment into one (``optimize``): a third less CPU than
merging as it goes on ConceptNet-scale labels; the default merging is restored for any later writes."""


class _Writer:
    """Streams nodes and names into an index built in memory, written to ``path`` when done (through a
    temporary file renamed into place)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(path.name + ".tmp")
        self.tmp.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(":memory:")
        self.db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA temp_store=MEMORY;"
                              + _SCHEMA)
        self.nodes = 0
        self.names = 0
        self.words: set[str] = set()
        self.longest = 0
        self._node_rows: list[tuple[int, str, str, int | None]] = []
        self._name_rows: list[tuple[str, int, str, int]] = []

    def node(self, node: int, label: str, term: str, aliases: Iterable[str] = (), degree: int | None = None,
             named: bool = True) -> None:
        """Add a node; its ``label`` and ``aliases`` are names to ground to unless ``named`` is false (an
        IRI without a name literal, kept only for P_sub's statistics)."""
        self._node_rows.append((node, label, term, degree))
        self.nodes += 1
        names = [label, *aliases] if named else []
        for k, (key, name) in enumerate(zip(phrase_keys(names), names, strict=True)):
            if key:
                self._name_rows.append((key, node, name, int(k > 0)))
        if len(self._name_rows) >= _BATCH or len(self._node_rows) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        self.db.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?)", self._node_rows)
        self.add_names([r[0] for r in self._name_rows], self._name_rows)
        self._node_rows.clear()
        self._name_rows.clear()

    def add_names(self, keys: list[str], rows: Iterable[tuple[str, int, str, int]]) -> None:
        """Insert ``(key, node, name, alias)`` rows whose keys are ``keys`` (none blank); count their
        words and the longest key."""
        self.db.executemany("INSERT INTO names (key, node, name, alias) VALUES (?, ?, ?, ?)", rows)
        self.names += len(keys)
        if keys:
            self.words.update(" ".join(keys).split(" "))
            self.longest = max(self.longest, 1 + max(map(str.count, keys, itertools.repeat(" "))))

    def finish(self, meta: dict[str, Any], neighbours: Callable[[int], int] | None = None) -> None:
        """Write the file; ``neighbours``: distinct neighbours of a node (a graph file's), for the probe."""
        self.flush()
        ids = sorted({round(i * (self.nodes - 1) / (PROBE_NODES - 1)) for i in range(PROBE_NODES)}
                     ) if self.nodes > 1 else list(range(self.nodes))
        probe = [[term, label, neighbours(v) if neighbours is not None else None]
                 for v, label, term in self.db.execute(
                     f"SELECT node, label, term FROM nodes WHERE node IN ({','.join('?' * len(ids))}) "
                     "ORDER BY node", ids)]
        meta = {**meta, "probe": json.dumps(probe)}
        self.db.executemany("INSERT INTO words VALUES (?)", ((w,) for w in sorted(self.words)))
        self.db.executescript(_FINISH)
        meta = {**meta, "version": INDEX_VERSION, "nodes": self.nodes, "names": self.names,
                "longest": self.longest}
        self.db.executemany("INSERT INTO meta VALUES (?, ?)", ((k, str(v)) for k, v in meta.items()))
        self.db.commit()
        self.db.execute("VACUUM INTO ?", (str(self.tmp),))
        self.db.close()
        self.tmp.replace(self.path)


def _from_graph(kg: CSRGraph, w: _Writer) -> dict[str, Any]:
    """Every label and alias of a graph file, with its degrees and hub lists (numpy over the CSR arrays;
    rows handed to ``executemany`` as C-level iterators)."""
    from kgwise.kg.hubs import hub_lists

    alias_nodes, alias_names = kg.alias_pairs()
    n = kg.num_nodes
    hubs = hub_lists(kg, HUB_CAP)
    w.db.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?)",
                     zip(range(n), kg.labels, map(EXPORT_BASE.__add__, map(str, range(n))),
                         hubs.degree.tolist(), strict=True))
    nbr = hubs.nbr.astype("<i4")
    ptr = hubs.ptr.tolist()
    w.db.executemany("INSERT INTO hubs VALUES (?, ?)",
                     ((v, nbr[ptr[i]:ptr[i + 1]].tobytes()) for i, v in enumerate(hubs.hubs.tolist())))
    names = [*kg.labels, *alias_names]
    keys = phrase_keys(names)
    nodes = itertools.chain(range(n), alias_nodes.tolist())
    alias = itertools.chain(itertools.repeat(0, n), itertools.repeat(1, len(alias_names)))
    rows: Iterable[tuple[str, int, str, int]] = zip(keys, nodes, names, alias, strict=True)
    if "" in keys:  # a name without letters or digits has no key
        kept = [bool(k) for k in keys]
        rows, keys = itertools.compress(rows, kept), list(itertools.compress(keys, kept))
    w.add_names(keys, rows)
    w.nodes = n
    return {"kind": "graph", "content_hash": graph_content_hash(kg), "edges": kg.num_edges,
            "labelled": kg.num_nodes, "hub_cap": HUB_CAP}


class _EdgeCounter:
    """The edges of an RDF source as they stream by (a subject IRI, a predicate, an object IRI or literal;
    no blank node, no name literal), each end numbered on first sight, for P_sub's statistics."""

    def __init__(self) -> None:
        self.ids: dict[str | tuple[str, str, str], int] = {}  # an IRI, or a literal's (value, lang, datatype)
        self.preds: dict[str, int] = {}
        self.h = array("q")
        self.p = array("q")
        self.t = array("q")

    def add(self, subj: str, pred: str, obj: str | tuple[str, str, str]) -> None:
        ids = self.ids
        self.h.append(ids.setdefault(subj, len(ids)))
        self.p.append(self.preds.setdefault(pred, len(self.preds)))
        self.t.append(ids.setdefault(obj, len(ids)))

    def write(self, w: _Writer, labels: dict[str, tuple[str, list[str]]]) -> int:
        """Write the nodes: ``labels`` (IRI -> label and aliases) first, in their order, with names; then
        the IRIs that end an edge without a name (their local name as label, nothing to ground to); each
        with its degree, and the hub lists (:func:`kgwise.kg.hubs.edge_hub_lists`, deduplicated edges).
        A hub whose list holds a literal keeps none (P_sub reads it from the graph). Returns the edges."""
        from kgwise.kg.hubs import edge_hub_lists
        from kgwise.kg.loaders.ntriples import iri_local_name

        index = {iri: i for i, iri in enumerate(labels)}
        for key in self.ids:
            if isinstance(key, str) and key not in index:
                index[key] = len(index)
        iris = len(index)
        perm = np.fromiter((index.get(k, -1) if isinstance(k, str) else -1 for k in self.ids), dtype=np.int64,
                           count=len(self.ids))
        literal = perm < 0
        perm[literal] = iris + np.arange(int(literal.sum()), dtype=np.int64)
        h, p, t = (np.frombuffer(a, dtype=np.int64) if len(a) else np.empty(0, np.int64)
                   for a in (self.h, self.p, self.t))
        h, t = perm[h], perm[t]
        order = np.lexsort((t, p, h))
        h, p, t = h[order], p[order], t[order]
        if h.size:  # a triple given twice is one edge
            first = np.ones(h.size, dtype=bool)
            first[1:] = (h[1:] != h[:-1]) | (p[1:] != p[:-1]) | (t[1:] != t[:-1])
            h, t = h[first], t[first]
        hubs = edge_hub_lists(iris + int(literal.sum()), h, t, HUB_CAP)
        degree = hubs.degree.tolist()
        for iri, v in index.items():
            if v < len(labels):
                label, aliases = labels[iri]
                w.node(v, label, iri, aliases, degree[v])
            else:
                w.node(v, iri_local_name(iri), iri, degree=degree[v], named=False)
        w.flush()
        nbr, ptr = hubs.nbr, hubs.ptr.tolist()
        w.db.executemany("INSERT INTO hubs VALUES (?, ?)", (
            (v, nbr[ptr[i]:ptr[i + 1]].astype("<i4").tobytes()) for i, v in enumerate(hubs.hubs.tolist())
            if v < iris and not (nbr[ptr[i]:ptr[i + 1]] >= iris).any()))
        return int(h.size)


def _from_ntriples(path: Path, w: _Writer) -> dict[str, Any]:
    """Stream a dump: every IRI with a name literal (``rdfs:label``, ``skos:prefLabel``/``altLabel``;
    English or untagged for aliases, the preferred ``rdfs:label`` as label, else the local name), and
    P_sub's degrees and hub lists, counted as the edges go by (:class:`_EdgeCounter`)."""
    from kgwise.kg.loaders._common import numbered_lines
    from kgwise.kg.loaders.ntriples import (
        NAME_PREDICATES,
        RDFS_COMMENT,
        RDFS_LABEL,
        label_rank,
        parse_ntriples_line,
    )

    digest = hashlib.sha256()
    names: dict[str, dict[str, None]] = {}
    best: dict[str, tuple[int, str]] = {}
    counter = _EdgeCounter()
    for lineno, line in numbered_lines(path):
        digest.update(line.encode("utf-8") + b"\n")
        try:
            parsed = parse_ntriples_line(line)
        except ValueError as exc:
            raise DataError(f"{exc}: {line[:80]!r}", path, lineno) from exc
        if parsed is None:
            continue
        subj, pred, obj = parsed
        if obj[0] != "literal" or pred not in NAME_PREDICATES:
            if subj[0] == "iri" and obj[0] != "bnode":
                counter.add(subj[1], pred, obj[1] if obj[0] == "iri" else obj[1:])
            continue
        if pred == RDFS_COMMENT or subj[0] != "iri":
            continue
        rank = label_rank(obj[2])
        forms = names.setdefault(subj[1], {})
        if rank == 0:
            forms[obj[1]] = None
        if pred == RDFS_LABEL and (subj[1] not in best or rank < best[subj[1]][0]):
            best[subj[1]] = (rank, obj[1])
    edges = counter.write(w, _named(names, best))
    return {"kind": "rdf", "content_hash": "sha256:" + digest.hexdigest(), "edges": edges,
            "labelled": len(names), "hub_cap": HUB_CAP}


def _named(names: dict[str, dict[str, None]], best: dict[str, tuple[int, str]]
           ) -> dict[str, tuple[str, list[str]]]:
    """IRI -> (label, other names): the best ``rdfs:label``, else the local name."""
    from kgwise.kg.loaders.ntriples import iri_local_name

    out: dict[str, tuple[str, list[str]]] = {}
    for iri, forms in names.items():
        label = best[iri][1] if iri in best else iri_local_name(iri)
        out[iri] = (label, [f for f in forms if f != label])
    return out


def _label_rows_query(page: int, offset: int) -> str:
    from kgwise.kg.loaders.ntriples import RDFS_LABEL, SKOS_ALT_LABEL, SKOS_PREF_LABEL

    return (f"SELECT ?s ?p ?l WHERE {{ ?s ?p ?l . VALUES ?p {{ <{RDFS_LABEL}> <{SKOS_PREF_LABEL}> "
            f"<{SKOS_ALT_LABEL}> }} FILTER(isIRI(?s) && isLiteral(?l)) }} ORDER BY ?s ?p ?l "
            f"LIMIT {page} OFFSET {offset}")


_EDGE_BATCH = 500
"""Nodes whose edges (both directions) one query of an endpoint's statistics walk reads."""


def _edges_query(nodes: Sequence[str | tuple[str, str, str]]) -> str:
    from kgwise.kg.loaders.ntriples import NAME_PREDICATES, literal_syntax

    names = ", ".join(f"<{p}>" for p in NAME_PREDICATES)
    values = " ".join(f"<{n}>" if isinstance(n, str) else literal_syntax(n[0]) + (
        f"@{n[1]}" if n[1] else f"^^<{n[2]}>" if n[2] else "") for n in nodes)
    return (f"SELECT ?s ?p ?o WHERE {{ VALUES ?n {{ {values} }} "
            f"{{ ?n ?p ?o BIND(?n AS ?s) FILTER(isIRI(?n) && !isBlank(?o) && "
            f"!(isLiteral(?o) && ?p IN ({names}))) }} UNION "
            f"{{ ?s ?p ?n BIND(?n AS ?o) FILTER(isIRI(?s) && !(isLiteral(?n) && ?p IN ({names}))) }} }}")


def _read_edges(kg: SPARQLGraph, named: Iterable[str], progress: Callable[[str], None] | None
                ) -> _EdgeCounter:
    """Every edge of the endpoint's components that hold a named IRI (the only ones P_sub can reach from a
    grounded node): a breadth-first walk from the named IRIs, one ``VALUES`` query per ``_EDGE_BATCH``
    nodes reading their edges in both directions, so the store answers from its indexes (no ``ORDER BY``
    or ``OFFSET`` over every triple, which costs a sort of the whole store per page)."""
    from kgwise.kg.sparql import XSD_STRING

    counter = _EdgeCounter()
    seen: dict[str | tuple[str, str, str], None] = dict.fromkeys(named)
    todo = list(seen)
    done = 0
    while done < len(todo):
        part = todo[done:done + _EDGE_BATCH]
        done += len(part)
        for row in kg.select(_edges_query(part)):
            try:
                subj, pred, obj = row["s"]["value"], row["p"]["value"], row["o"]
                if obj["type"] == "uri":
                    end: str | tuple[str, str, str] = obj["value"]
                else:
                    dt = obj.get("datatype", "")
                    end = (obj["value"], obj.get("xml:lang", "").lower(), "" if dt == XSD_STRING else dt)
            except (KeyError, TypeError) as exc:
                raise DataError(f"{kg.endpoint}: an edge row without ?s ?p ?o ({exc})") from exc
            counter.add(subj, pred, end)  # an edge read from both ends is deduplicated when written
            for x in (subj, end):
                if x not in seen:
                    seen[x] = None
                    todo.append(x)
        if progress is not None:
            progress(f"{done:,} of {len(todo):,} nodes' edges read (P_sub's degrees and hub lists)")
    return counter


def _from_endpoint(kg: SPARQLGraph, w: _Writer, page: int, progress: Callable[[str], None] | None,
                   hub_stats: bool) -> dict[str, Any]:
    """Page through the endpoint's name triples (``ORDER BY`` for stable pages); with ``hub_stats``, also
    read its edges for P_sub's degrees and hub lists (:func:`_read_edges`)."""
    from kgwise.kg.loaders.ntriples import RDFS_LABEL, label_rank

    digest = hashlib.sha256()
    names: dict[str, dict[str, None]] = {}
    best: dict[str, tuple[int, str]] = {}
    offset = 0
    while True:
        rows = kg.select(_label_rows_query(page, offset))
        for row in rows:
            try:
                iri, pred, lit = row["s"]["value"], row["p"]["value"], row["l"]
                value, lang = lit["value"], lit.get("xml:lang", "").lower()
            except (KeyError, TypeError) as exc:
                raise DataError(f"{kg.endpoint}: a name row without ?s ?p ?l ({exc})") from exc
            digest.update(f"{iri}\t{pred}\t{value}\t{lang}\n".encode())
            rank = label_rank(lang)
            forms = names.setdefault(iri, {})
            if rank == 0:
                forms[value] = None
            if pred == RDFS_LABEL and (iri not in best or (rank, value) < best[iri]):
                best[iri] = (rank, value)
        offset += len(rows)
        if progress is not None:
            progress(f"{offset:,} name triples read")
        if len(rows) < page:
            break
    labels = _named(names, best)
    meta = {"kind": "rdf", "content_hash": "sha256:" + digest.hexdigest(), "labelled": len(names)}
    if hub_stats:
        return {**meta, "edges": _read_edges(kg, labels, progress).write(w, labels), "hub_cap": HUB_CAP}
    for v, (iri, (label, aliases)) in enumerate(labels.items()):
        w.node(v, label, iri, aliases)
    return {**meta, "edges": kg.num_edges}


def build_index(source: str | Path, out: str | Path, page: int = 10_000,
                progress: Callable[[str], None] | None = None, hub_stats: bool = False) -> IndexBuild:
    """Build the index of ``source`` into ``out``: a graph file (``.npz``, ``.tsv``, ``.nt`` read as a
    graph), an N-Triples dump streamed without building a graph (``--format nt``: pass a ``.nt``/``.nt.gz``
    path prefixed ``nt:``), or a SPARQL endpoint (``sparql:URL``), read ``page`` name triples per query.
    P_sub's degrees and hub lists come with a graph file or a dump; from an endpoint only with
    ``hub_stats`` (every edge reachable from a named node read, ``_EDGE_BATCH`` nodes per query: minutes
    on a large store)."""
    from kgwise.kg.sources import is_endpoint

    t0 = time.perf_counter()
    w = _Writer(Path(out))
    try:
        if is_endpoint(source):
            from kgwise.kg.sparql import SPARQLGraph

            endpoint = SPARQLGraph(str(source).removeprefix("sparql:"))
            meta = _from_endpoint(endpoint, w, page, progress, hub_stats)
            label = endpoint.endpoint
        elif str(source).startswith("nt:"):
            path = Path(str(source)[3:])
            meta = _from_ntriples(path, w)
            label = str(path)
        else:
            from kgwise.kg.loaders import open_graph_file

            graph = open_graph_file(source)
            meta = _from_graph(graph, w)
            label = str(source)
            w.finish({**meta, "source": label}, lambda v: int(graph.neighbors([v]).size))
            return _built(w, label, meta, t0)
        w.finish({**meta, "source": label})
    except BaseException:
        w.db.close()
        w.tmp.unlink(missing_ok=True)
        raise
    return _built(w, label, meta, t0)


def _built(w: _Writer, label: str, meta: dict[str, Any], t0: float) -> IndexBuild:
    return IndexBuild(w.path, w.nodes, w.names, time.perf_counter() - t0, label, meta["kind"],
                      meta["content_hash"])


class _Words(Collection[str]):
    """The index's token vocabulary as a collection (membership is one indexed query, memoised)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._memo: dict[str, bool] = {}

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return False
        hit = self._memo.get(word)
        if hit is None:
            hit = self._memo[word] = self._db.execute(
                "SELECT 1 FROM words WHERE word = ?", (word,)).fetchone() is not None
        return hit

    def __iter__(self) -> Iterator[str]:
        return (w for (w,) in self._db.execute("SELECT word FROM words"))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM words").fetchone()[0])


class LabelIndex:
    """An index file opened read-only; node ids are the source's (see the module docstring). Use
    :meth:`bind` to ground in a graph."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError("label index not found (build one with `kgwise kg index build`)", self.path)
        try:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self.meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            raise DataError(f"not a kgwise label index: {exc}", self.path) from exc
        if self.meta.get("version") != str(INDEX_VERSION):
            raise DataError(f"label index version {self.meta.get('version')!r}, expected {INDEX_VERSION}: "
                            "rebuild it", self.path)
        self.db.execute("PRAGMA cache_size=-16000")
        self.longest = int(self.meta["longest"])
        self.words: Collection[str] = _Words(self.db)
        self._memo: dict[str, tuple[int, bool] | None] = {}
        self._caps: dict[str, bool] = {}

    @property
    def kind(self) -> str:
        """``graph`` (built from a graph file) or ``rdf`` (from a dump or an endpoint)."""
        return self.meta["kind"]

    def lookup(self, key: str) -> tuple[int, bool] | None:
        """``(node, via an alias?)`` of a phrase key: the lowest-id label, else the lowest-id alias."""
        if key in self._memo:
            return self._memo[key]
        row = self.db.execute("SELECT node, alias FROM names WHERE key = ? ORDER BY alias, node LIMIT 1",
                              (key,)).fetchone()
        found = None if row is None else (int(row[0]), bool(row[1]))
        if len(self._memo) > 100_000:
            self._memo.clear()
        self._memo[key] = found
        return found

    def caps_only(self, key: str) -> bool:
        """Whether every name keyed ``key`` is written in capitals and so links only a span written so
        (:class:`kgwise.kg.names.NameVariants`: an alias such as "US", or a label whose lower-case form
        is an English word)."""
        found = self._caps.get(key)
        if found is None:
            rows = self.db.execute("SELECT name, alias FROM names WHERE key = ?", (key,)).fetchall()
            found = bool(rows) and all(is_acronym(name) and (alias or key in stopwords() or key in
                                                             common_words()) for name, alias in rows)
            if len(self._caps) > 100_000:
                self._caps.clear()
            self._caps[key] = found
        return found

    def fuzzy(self, key: str, limit: int, min_score: float, candidates: int = 400
              ) -> list[tuple[int, str, float]]:
        """``(node, name, similarity)``: candidates sharing a character trigram with ``key`` (FTS5, best
        BM25 first) or its first two characters, re-ranked by normalised Levenshtein similarity."""
        if not key or limit <= 0:
            return []
        rows: list[tuple[str, int, str]] = []
        grams = sorted({key[i:i + 3] for i in range(len(key) - 2)} - {"   "})
        if grams:
            match = " OR ".join('"' + g.replace('"', '""') + '"' for g in grams)
            rows += self.db.execute(
                "SELECT n.key, n.node, n.name FROM names_fts f JOIN names n ON n.id = f.rowid "
                "WHERE names_fts MATCH ? ORDER BY f.rank LIMIT ?", (match, candidates)).fetchall()
        lo = key[:2]
        rows += self.db.execute(
            "SELECT key, node, name FROM names WHERE key >= ? AND key < ? AND length(key) BETWEEN ? AND ? "
            "LIMIT ?", (lo, lo + "\uffff", len(key) - 2, len(key) + 2, candidates)).fetchall()
        keys = [r[0] for r in rows]
        out: list[tuple[int, str, float]] = []
        seen: set[int] = set()
        for i, score in fuzzy_scores(key, keys, len(keys), min_score):
            node = int(rows[i][1])
            if node not in seen:
                seen.add(node)
                out.append((node, rows[i][2], score))
            if len(out) == limit:
                break
        return out

    def label(self, node: int) -> str:
        row = self.db.execute("SELECT label FROM nodes WHERE node = ?", (node,)).fetchone()
        if row is None:
            raise DataError(f"node {node} not in the label index", self.path)
        return str(row[0])

    def term(self, node: int) -> str:
        row = self.db.execute("SELECT term FROM nodes WHERE node = ?", (node,)).fetchone()
        if row is None:
            raise DataError(f"node {node} not in the label index", self.path)
        return str(row[0])

    def suggest(self, text: str, limit: int = 3) -> list[str]:
        """Preferred labels of the nodes whose names are closest to ``text``."""
        return [self.label(v) for v, _, _ in self.fuzzy(phrase_key(text), limit, 0.6)]

    @property
    def hub_cap(self) -> int | None:
        """The cap of the stored hub lists (:mod:`kgwise.kg.hubs`), or ``None`` for an index without
        graph statistics (one built from a dump or an endpoint)."""
        cap = self.meta.get("hub_cap")
        return int(cap) if cap is not None else None

    def nodes_of_terms(self, terms: Iterable[str]) -> dict[str, int]:
        """The index ids of those ``terms`` (IRIs) it holds."""
        found: dict[str, int] = {}
        todo = list(dict.fromkeys(terms))
        for start in range(0, len(todo), _IN_BATCH):
            part = todo[start:start + _IN_BATCH]
            found.update((str(t), int(v)) for t, v in self.db.execute(
                f"SELECT term, node FROM nodes WHERE term IN ({','.join('?' * len(part))})", part))
        return found

    def rows(self, nodes: Iterable[int]) -> dict[int, tuple[str, str, int | None]]:
        """``node -> (label, term, degree)`` of those ``nodes`` it holds (degree ``None`` without
        statistics)."""
        found: dict[int, tuple[str, str, int | None]] = {}
        todo = list(dict.fromkeys(int(v) for v in nodes))
        for start in range(0, len(todo), _IN_BATCH):
            part = todo[start:start + _IN_BATCH]
            found.update((int(v), (str(lab), str(term), None if d is None else int(d))) for v, lab, term, d in
                         self.db.execute("SELECT node, label, term, degree FROM nodes WHERE node IN "
                                         f"({','.join('?' * len(part))})", part))
        return found

    def hub(self, node: int) -> npt.NDArray[np.int64] | None:
        """The stored capped neighbour list of ``node`` (sorted by ``(degree, id)``), or ``None`` when it
        is no hub."""
        row = self.db.execute("SELECT nbrs FROM hubs WHERE node = ?", (int(node),)).fetchone()
        return None if row is None else np.frombuffer(row[0], dtype="<i4").astype(np.int64)

    def bind(self, kg: KnowledgeGraph) -> BoundIndex:
        """This index as the name index of ``kg``, after checking it was built from ``kg``: the content
        hash of a graph file's graph; for an endpoint, the labels (and, for an index of a graph file,
        the distinct neighbour counts) of the ``PROBE_NODES`` probe nodes the build recorded.
        ``ConfigError`` naming the difference when they differ."""
        from kgwise.kg.csr import CSRGraph
        from kgwise.kg.sparql import SPARQLGraph

        if isinstance(kg, CSRGraph):
            if self.kind != "graph":
                raise ConfigError(f"{self.path} was built from {self.meta['source']} (RDF), not from a graph "
                                  "file: build the index from the graph file in use")
            now = graph_content_hash(kg)
            if now != self.meta["content_hash"]:
                raise ConfigError(f"{self.path} was built from another graph ({self.meta['source']}, "
                                  f"{self.meta['content_hash'][:19]}…) than the one in use ({now[:19]}…): "
                                  "rebuild it with `kgwise kg index build`")
            return BoundIndex(self, kg, None)
        if isinstance(kg, SPARQLGraph):
            differs = self._probe(kg)
            if differs:
                raise ConfigError(f"{self.path} was built from another graph ({self.meta['source']}) than "
                                  f"{kg.endpoint} serves: {differs}; rebuild it from the graph file the "
                                  "store was loaded from, or with "
                                  f"`kgwise kg index build sparql:{kg.endpoint}`")
            return BoundIndex(self, kg, kg)
        raise ConfigError("a label index serves a graph file or a SPARQL endpoint, not a "
                          f"{type(kg).__name__}")

    def _probe(self, kg: SPARQLGraph) -> str | None:
        """How the endpoint differs from the probe nodes the index recorded (their ``rdfs:label``; for an
        index of a graph file also their distinct neighbours), or ``None``: two queries, where counting
        every triple (``COUNT(*)``) takes minutes on a large store."""
        from kgwise.kg.loaders.ntriples import NAME_PREDICATES, RDFS_LABEL, iri_local_name

        probe: list[list[Any]] = json.loads(self.meta["probe"])
        if not probe:
            return None
        values = " ".join(f"<{term}>" for term, _, _ in probe)
        labels: dict[str, set[str]] = {}
        for row in kg.select(f"SELECT ?n ?l WHERE {{ VALUES ?n {{ {values} }} ?n <{RDFS_LABEL}> ?l }}"):
            labels.setdefault(row["n"]["value"], set()).add(row["l"]["value"])
        for term, label, _ in probe:
            found = labels.get(term)
            if (label not in found) if found else (label != iri_local_name(term)):
                return f"<{term}> is labelled {sorted(found or ['(nothing)'])[:3]} there, {label!r} here"
        if probe[0][2] is None:
            return None
        names = ", ".join(f"<{p}>" for p in NAME_PREDICATES)
        rows = kg.select(f"SELECT ?n (COUNT(DISTINCT ?x) AS ?d) WHERE {{ VALUES ?n {{ {values} }} "
                         f"{{ ?n ?p ?x FILTER(!(isLiteral(?x) && ?p IN ({names}))) }} "
                         "UNION { ?x ?p ?n } } GROUP BY ?n")
        degrees = {row["n"]["value"]: int(row["d"]["value"]) for row in rows}
        for term, _, want in probe:
            if degrees.get(term, 0) != want:
                return f"<{term}> has {degrees.get(term, 0)} distinct neighbours there, {want} here"
        return None

    def close(self) -> None:
        self.db.close()


class BoundIndex:
    """A :class:`LabelIndex` answering in the node ids of one graph: a graph file's ids as stored, an
    endpoint's ids through the stored IRIs (each node registered with its label, so no label query). With
    graph statistics (``hub_cap`` not ``None``) it also gives P_sub's hub rule its degrees and hub lists
    (:meth:`degree_of`, :meth:`hub_neighbours`)."""

    def __init__(self, index: LabelIndex, kg: KnowledgeGraph, endpoint: SPARQLGraph | None) -> None:
        self.index = index
        self.kg = kg
        self.endpoint = endpoint
        self.longest = index.longest
        self.words = index.words
        self.hub_cap = index.hub_cap
        self._to_index: dict[int, int] = {}  # graph id -> index id (an endpoint's)
        self._degree: dict[int, int] = {}  # graph id -> degree (-1: not in the index)

    def _node(self, node: int) -> int:
        if self.endpoint is None:
            return node
        return self._nodes([node])[0]

    def _nodes(self, nodes: Sequence[int]) -> list[int]:
        """Graph ids of index ids (an endpoint's registered with their labels and degrees)."""
        if self.endpoint is None:
            return [int(v) for v in nodes]
        rows = self.index.rows(nodes)
        out: list[int] = []
        for v in nodes:
            label, term, degree = rows[int(v)]
            node = self.endpoint.node_of_iri(term, label)
            self._to_index[node] = int(v)
            if degree is not None:
                self._degree[node] = degree
            out.append(node)
        return out

    def _index_ids(self, nodes: Sequence[int]) -> list[int | None]:
        """Index ids of graph ids (``None``: a node the index does not hold)."""
        if self.endpoint is None:
            return [int(v) for v in nodes]
        ep = self.endpoint
        missing = [v for v in nodes if v not in self._to_index]
        if missing:
            iris = {v: ep.iri(v) for v in missing}
            found = self.index.nodes_of_terms(t for t in iris.values() if t is not None)
            for v, iri in iris.items():
                self._to_index[v] = found.get(iri, -1) if iri is not None else -1
        return [None if self._to_index[v] < 0 else self._to_index[v] for v in nodes]

    def index_ids(self, nodes: Sequence[int]) -> npt.NDArray[np.int64]:
        """The index's ids of graph ids (-1 for a node it does not hold)."""
        ids = self._index_ids([int(v) for v in nodes])
        return np.fromiter((-1 if i is None else i for i in ids), dtype=np.int64, count=len(ids))

    def degree_of(self, nodes: Sequence[int]) -> npt.NDArray[np.int64]:
        """Stored degrees (edges touching each node, both directions) of graph ids; -1 for a node the index
        does not hold or an index without statistics."""
        todo = [int(v) for v in dict.fromkeys(nodes) if int(v) not in self._degree]
        if todo:
            ids = self._index_ids(todo)
            rows = self.index.rows(i for i in ids if i is not None)
            for v, i in zip(todo, ids, strict=True):
                d = rows[i][2] if i is not None and i in rows else None
                self._degree[v] = -1 if d is None else d
        return np.fromiter((self._degree[int(v)] for v in nodes), dtype=np.int64, count=len(nodes))

    def hub_neighbours(self, node: int) -> npt.NDArray[np.int64] | None:
        """``capN(node)`` as stored (graph ids, sorted by ``(degree, index id)``), or ``None`` when the node
        is no hub (or not in the index)."""
        i = self._index_ids([int(node)])[0]
        found = self.index.hub(i) if i is not None else None
        if found is None:
            return None
        return np.asarray(self._nodes(found.tolist()), dtype=np.int64)

    def lookup(self, key: str) -> tuple[int, bool] | None:
        hit = self.index.lookup(key)
        return None if hit is None else (self._node(hit[0]), hit[1])

    def caps_only(self, key: str) -> bool:
        return self.index.caps_only(key)

    def fuzzy(self, key: str, limit: int, min_score: float) -> list[tuple[int, str, float]]:
        found = self.index.fuzzy(key, limit, min_score)
        nodes = self._nodes([v for v, _, _ in found])
        return [(v, name, s) for v, (_, name, s) in zip(nodes, found, strict=True)]

    def suggest(self, text: str, limit: int = 3) -> list[str]:
        return self.index.suggest(text, limit)


def open_index(kg: KnowledgeGraph, path: str | Path | None = None,
               progress: Callable[[str], None] | None = None) -> BoundIndex:
    """The label index of ``kg``, bound to it: ``path`` when given (refused when built from another
    graph); for an endpoint without one, the index kept for its URL in the cache directory
    (``label-index/<SHA-256 of the URL>.sqlite``), built from the endpoint's labels (paged queries) when
    missing, outdated, or made from another content than the endpoint serves now."""
    from kgwise.config import cache_dir
    from kgwise.kg.sparql import SPARQLGraph

    if path is not None:
        return LabelIndex(path).bind(kg)
    if not isinstance(kg, SPARQLGraph):
        raise ConfigError("build a graph file's label index with `kgwise kg index build GRAPH --out IDX` "
                          "and pass it as the index")
    say = progress or (lambda _m: None)
    cached = cache_dir() / "label-index" / f"{hashlib.sha256(kg.endpoint.encode()).hexdigest()[:32]}.sqlite"
    if cached.is_file():
        try:
            index = LabelIndex(cached)
        except DataError as exc:
            say(f"rebuilding the cached label index of {kg.endpoint}: {exc}")
        else:
            try:
                return index.bind(kg)
            except ConfigError as exc:
                index.close()
                say(f"rebuilding the cached label index of {kg.endpoint}: {exc}")
    else:
        say(f"building the label index of {kg.endpoint} into {cached} (once; reused while the endpoint's "
            "content stays the same)")
    build_index(f"sparql:{kg.endpoint}", cached, progress=say)
    return LabelIndex(cached).bind(kg)
