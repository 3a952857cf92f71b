"""A ``KnowledgeGraph`` read from a SPARQL endpoint (W3C SPARQL 1.1 Protocol, JSON or XML results).

The graph is explored on demand: a node's edges are one query the first time they are asked for, then
cached (LRU). RDF is read as :func:`kgwise.kg.loaders.load_ntriples` reads a file, so the same triples
give the same graph either way: IRIs and literal objects are nodes; ``rdfs:label`` and ``rdfs:comment``
literals label a node instead of being edges; a node's label is its ``rdfs:label`` (English or untagged
preferred; among several such, the smallest here and the file's first there), else the IRI's local name;
a relation is named by its predicate's local name. Blank nodes are left out: their labels are scoped to
one result set, so they cannot be queried again.

Node and relation ids are given in first-seen order, so ``num_nodes`` and ``num_relations`` count what has
been seen so far; ``num_edges`` is one ``COUNT`` query. A hub's edges are read up to
``SPARQLConfig.max_edges`` per direction (``truncated`` counts the cut lists). :meth:`SPARQLGraph.find`
looks a label up through the endpoint's index (the label as written, lower case, capitalised, title case;
untagged and ``@en``, as ``rdfs:label``, ``skos:prefLabel`` or ``skos:altLabel``), so it finds named nodes
and literal values, not IRI local names. Free-text grounding runs over a label index of the endpoint
(:mod:`kgwise.kg.label_index`, ``kgwise kg index build sparql:URL``); UAG, which starts from topic
entities by name, runs on an endpoint directly. :meth:`SPARQLGraph.prefetch` reads many nodes' edges with
one ``VALUES`` query per batch and direction, the queries of one step sent side by side
(:meth:`SPARQLGraph.select_many`, ``SPARQLConfig.parallel``: one round trip, where a ``UNION`` of both
directions in one query costs the store their sum); ``neighbors``, ``degree`` and ``edges_among`` use it.
:meth:`SPARQLGraph.edges_among` told which nodes are hubs (P_sub's statistics from a label index) never
reads a hub's edge list: it reads the other nodes' lists and asks for the edges between two hubs pair by
pair, in the same round trip.

Replies are read as SPARQL JSON results, or as SPARQL XML results when the server sends those. A Virtuoso
endpoint (known by the ``Server`` header of its first reply) is asked for XML (:data:`XML_RESULTS`: its JSON
writer costs ~4× the CPU), and its hub-pair queries carry its ``DEFINE sql:select-option "order"`` pragma
(:data:`VIRTUOSO_ORDER`), which keeps the written join order instead of searching plans.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET  # a query endpoint's reply: expat >= 2.4 bounds entity expansion
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError, ServiceError, TransientError
from kgwise.kg.base import Direction, EdgeArrays, IdArray, normalise_label
from kgwise.kg.loaders._common import Interner
from kgwise.kg.loaders.ntriples import (
    NAME_PREDICATES,
    RDFS_COMMENT,
    RDFS_LABEL,
    SKOS_ALT_LABEL,
    SKOS_PREF_LABEL,
    iri_local_name,
    label_rank,
    literal_syntax,
)
from kgwise.retry import RetryPolicy, RetryStats, call_with_retry, send_once

__all__ = ["VIRTUOSO_ORDER", "SPARQLConfig", "SPARQLError", "SPARQLGraph"]

LABEL_BATCH = 500
"""Nodes whose labels one query fetches."""

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
XML_RESULTS = "application/sparql-results+xml"
"""Asked of a Virtuoso endpoint instead of JSON: its JSON writer took ~4× the server CPU of its XML writer
(45–48 vs 12 ms a query for ~500-row edge lists of the ConceptNet-scale graph)."""
_SR = "{http://www.w3.org/2005/sparql-results#}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
VIRTUOSO_ORDER = 'DEFINE sql:select-option "order" '
"""Virtuoso's pragma that joins in the written order. Its plan search samples the index for the IRIs of a
query's ``VALUES`` block; for the hub-pair queries of :meth:`SPARQLGraph.edges_among` that took 0.4–0.7 s
the first time a server saw their IRIs (the ConceptNet-scale graph, a freshly started server; ~10 ms with
the pragma), while the written order (each pair, then its edges) is the plan it ends up choosing anyway."""
_NAMES = ", ".join(f"<{p}>" for p in NAME_PREDICATES)
Term = tuple[str, str, str, str]
"""``(kind, value, lang, datatype)`` with kind ``iri`` or ``literal``, as in the N-Triples loader."""


class SPARQLError(ServiceError):
    """The endpoint failed for good: an HTTP error, a reply that is not SPARQL JSON results, retries
    exhausted. Names the endpoint and the query."""


class TransientSPARQLError(SPARQLError, TransientError):
    """An endpoint failure worth retrying (HTTP 429/5xx, a dropped connection, a timeout)."""

    fatal = SPARQLError


@dataclass(frozen=True, slots=True)
class SPARQLConfig:
    """``max_edges``: edges read per node and direction; ``cache_nodes``: edge lists kept (LRU);
    ``batch``: nodes whose edges one ``VALUES`` query reads; ``parallel``: queries of one step sent side by
    side (1: one after another); ``retry``: timeouts and retries of each request (every request has a
    timeout); ``headers``: extra HTTP headers (e.g. an API key)."""

    max_edges: int = 10_000
    cache_nodes: int = 200_000
    batch: int = 200
    parallel: int = 4
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(max_retries=3, timeout_s=60.0))
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.max_edges < 1 or self.cache_nodes < 1 or self.batch < 1 or self.parallel < 1:
            raise ConfigError("SPARQLConfig: max_edges, cache_nodes, batch and parallel must be ≥ 1")


def _xml_rows(body: bytes) -> list[dict[str, dict[str, str]]]:
    """The rows of a SPARQL Query Results XML document, as the JSON format gives them (variable → ``type``,
    ``value``, ``xml:lang``, ``datatype``); ``ValueError`` naming what is missing or unknown."""
    root = ET.fromstring(body)
    results = root.find(f"{_SR}results")
    if root.tag != f"{_SR}sparql" or results is None:
        raise ValueError(f"root <{root.tag}> has no <results> (not a SELECT result)")
    rows: list[dict[str, dict[str, str]]] = []
    for result in results.iterfind(f"{_SR}result"):
        row: dict[str, dict[str, str]] = {}
        for binding in result.iterfind(f"{_SR}binding"):
            name = binding.get("name")
            if name is None or len(binding) != 1:
                raise ValueError("a <binding> needs a name and one term")
            term = binding[0]
            kind = term.tag.removeprefix(_SR)
            if kind not in ("uri", "literal", "bnode"):
                raise ValueError(f"unknown term <{term.tag}>")
            found = {"type": kind, "value": term.text or ""}
            lang, dt = term.get(_XML_LANG), term.get("datatype")
            if lang is not None:
                found["xml:lang"] = lang
            if dt is not None:
                found["datatype"] = dt
            row[name] = found
        rows.append(row)
    return rows


def _term(binding: dict[str, str]) -> Term | None:
    """A SPARQL JSON result term; ``None`` for a blank node."""
    kind = binding.get("type")
    if kind == "uri":
        return ("iri", binding["value"], "", "")
    if kind in ("literal", "typed-literal"):  # "typed-literal": SPARQL XML-era servers (Virtuoso)
        dt = binding.get("datatype", "")
        lang = binding.get("xml:lang", "").lower()
        return ("literal", binding["value"], lang, "" if dt == XSD_STRING else dt)
    return None


def _sparql(term: Term) -> str:
    """``term`` in SPARQL syntax."""
    kind, value, lang, dt = term
    if kind == "iri":
        return f"<{value}>"
    return literal_syntax(value) + (f"@{lang}" if lang else f"^^<{dt}>" if dt else "")


def _best_label(labels: Iterable[Term | None]) -> str | None:
    """The preferred ``rdfs:label`` among a node's label literals (English or untagged first, then the
    smallest), or ``None``."""
    ranked = [(label_rank(t[2]), t[1]) for t in labels if t is not None and t[0] == "literal"]
    return min(ranked)[1] if ranked else None


def _default_label(term: Term) -> str:
    return iri_local_name(term[1]) if term[0] == "iri" else term[1]


class SPARQLGraph:
    """The RDF graph behind a SPARQL query endpoint, as a :class:`kgwise.kg.KnowledgeGraph`; ``client``:
    an ``httpx.Client`` to send the queries with (its own headers then apply, not ``config.headers``).
    Safe to share between threads."""

    def __init__(self, endpoint: str, config: SPARQLConfig | None = None, client: httpx.Client | None = None
                 ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"SPARQL endpoint must be an http(s) URL, got {endpoint!r}")
        self.endpoint = endpoint
        self.name = endpoint
        self.config = config or SPARQLConfig()
        headers = {"Accept": "application/sparql-results+json", "User-Agent": "kgwise (SPARQL 1.1 Protocol)",
                   **dict(self.config.headers)}
        self._client = client or httpx.Client(headers=headers, timeout=self.config.retry.timeout_s)
        self.stats = RetryStats()
        self.truncated = 0
        self.round_trips = 0
        self._lock = threading.RLock()
        self._node_ids: dict[Term, int] = {}
        self._terms: list[Term] = []
        self._labels: dict[int, str] = {}
        self._texts: dict[int, str] = {}
        self._found: dict[str, int | None] = {}  # find's answers: a label is looked up once
        self._unlabelled: set[int] = set()
        self._rels = Interner()  # predicate IRIs
        self._edges: OrderedDict[tuple[int, bool], tuple[IdArray, IdArray]] = OrderedDict()
        self._num_edges: int | None = None
        self._among: dict[int, tuple[frozenset[int], tuple[tuple[int, int, int], ...]]] = {}
        self._pair_edges: dict[tuple[int, int], tuple[int, ...]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._virtuoso: bool | None = None  # the endpoint's Server header names Virtuoso; None: no reply yet

    def __repr__(self) -> str:
        return f"SPARQLGraph({self.endpoint!r}, seen {len(self._terms)} nodes)"

    # --- transport ----------------------------------------------------------------------------------
    def _post_once(self, query: str) -> list[dict[str, dict[str, str]]]:
        where = f"{self.endpoint} (query: {' '.join(query.split())[:200]})"
        headers = {"Accept": XML_RESULTS} if self._virtuoso else None
        resp = send_once(lambda: self._client.post(self.endpoint, data={"query": query}, headers=headers),
                         where, self.config.retry, TransientSPARQLError)
        if resp.status_code >= 400:
            raise SPARQLError(f"HTTP {resp.status_code} from {where}: {resp.text[:500]}")
        if self._virtuoso is None:
            self._virtuoso = resp.headers.get("server", "").lower().startswith("virtuoso")
        if resp.headers.get("content-type", "").startswith(XML_RESULTS):
            try:
                return _xml_rows(resp.content)
            except (ET.ParseError, ValueError) as exc:
                raise SPARQLError(f"{where}: the reply is not SPARQL XML results ({exc}): "
                                  f"{resp.text[:120]!r}") from exc
        try:
            data = resp.json()
            rows = data["results"]["bindings"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SPARQLError(f"{where}: the reply is not SPARQL JSON results (is this a query endpoint?): "
                              f"{resp.text[:120]!r}") from exc
        if not isinstance(rows, list):
            raise SPARQLError(f"{where}: results.bindings is not a list")
        return rows

    def select(self, query: str) -> list[dict[str, dict[str, str]]]:
        """Run a ``SELECT`` query; the result rows (variable → JSON term), with retries."""
        with self._lock:
            self.round_trips += 1
        return self._select(query)

    def _select(self, query: str) -> list[dict[str, dict[str, str]]]:
        rows, _ = call_with_retry(lambda: self._post_once(query), self.config.retry, stats=self.stats)
        return rows

    def is_virtuoso(self) -> bool:
        """Whether the endpoint is Virtuoso (its ``Server`` header); asked with one empty query when no reply
        has come yet."""
        if self._virtuoso is None:
            self.select("SELECT ?x WHERE { } LIMIT 1")
        return bool(self._virtuoso)

    # --- ids ----------------------------------------------------------------------------------------
    def _node(self, term: Term) -> int:
        found = self._node_ids.get(term)
        if found is None:
            found = self._node_ids[term] = len(self._terms)
            self._terms.append(term)
            if term[0] == "iri":
                self._unlabelled.add(found)
            else:
                self._labels[found] = term[1]
        return found

    def _check(self, node: int) -> Term:
        if not 0 <= node < len(self._terms):
            raise ConfigError(f"node id {node} not seen in {self.endpoint} (ids 0…{len(self._terms) - 1})")
        return self._terms[node]

    # --- KnowledgeGraph -----------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self._terms)

    @property
    def num_relations(self) -> int:
        return len(self._rels)

    @property
    def num_edges(self) -> int:
        """Triples that are edges (neither end a blank node, not a label or comment), counted once."""
        if self._num_edges is None:
            rows = self.select(
                "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o . FILTER(!isBlank(?s) && !isBlank(?o)) "
                f"FILTER(!(isLiteral(?o) && ?p IN ({_NAMES}))) }}")
            self._num_edges = int(rows[0]["n"]["value"]) if rows else 0
        return self._num_edges

    @property
    def labels(self) -> Sequence[str]:
        raise ConfigError(f"{self.endpoint}: grounding free text needs every node's label, which a SPARQL "
                          "endpoint does not list; build a label index (`kgwise kg index build "
                          f"sparql:{self.endpoint} --out IDX`) and pass it (--index IDX), or give the "
                          "question's topic entities by name")

    def label(self, node: int) -> str:
        """The node's label; an IRI's is fetched together with those of up to ``LABEL_BATCH − 1`` other
        nodes seen without one (a walk asks for its nodes' labels one by one)."""
        with self._lock:
            self._check(node)
            found = self._labels.get(node)
            if found is None:
                self._unlabelled.discard(node)
                batch = [node, *(self._unlabelled.pop() for _ in range(min(len(self._unlabelled),
                                                                            LABEL_BATCH - 1)))]
                values = " ".join(_sparql(self._terms[v]) for v in batch)
                rows = self.select(f"SELECT ?n ?l WHERE {{ VALUES ?n {{ {values} }} ?n <{RDFS_LABEL}> ?l . "
                                   "FILTER(isLiteral(?l)) }")
                by_node: dict[int, list[Term | None]] = {}
                for row in rows:
                    term = _term(row["n"])
                    if term is not None and term in self._node_ids:
                        by_node.setdefault(self._node_ids[term], []).append(_term(row["l"]))
                for v in batch:
                    self._labels[v] = _best_label(by_node.get(v, ())) or _default_label(self._terms[v])
                found = self._labels[node]
            return found

    def text(self, node: int) -> str:
        """The node's ``rdfs:comment`` (English or untagged preferred, then the smallest), or ``""``; read
        with its out-edges, or on its own when those were cut at ``max_edges``."""
        with self._lock:
            term = self._check(node)
            if term[0] != "iri":
                return ""
            if node not in self._texts:
                self._read(node, True)
            if node not in self._texts:
                rows = self.select(f"SELECT ?c WHERE {{ {_sparql(term)} <{RDFS_COMMENT}> ?c . "
                                   "FILTER(isLiteral(?c)) }")
                self._texts[node] = _best_label(_term(row["c"]) for row in rows) or ""
            return self._texts[node]

    def node_of_iri(self, iri: str, label: str | None = None) -> int:
        """The id of the node ``<iri>`` (registered if new), with its ``label`` when the caller knows it
        (a label index), which saves the label query."""
        with self._lock:
            node = self._node(("iri", iri, "", ""))
            if label is not None and node not in self._labels:
                self._labels[node] = label
                self._unlabelled.discard(node)
            return node

    def iri(self, node: int) -> str | None:
        """The IRI of the node (``None`` for a literal)."""
        term = self._check(node)
        return term[1] if term[0] == "iri" else None

    def relation_name(self, relation: int) -> str:
        if not 0 <= relation < len(self._rels):
            raise ConfigError(f"relation id {relation} not seen in {self.endpoint}")
        return iri_local_name(self._rels.labels[relation])

    def find(self, label: str) -> int | None:
        """A node whose label normalises like ``label`` (see the module docstring), or ``None``; each
        label is looked up once (calibration and answering ask again for the same topic entities)."""
        with self._lock:
            if label not in self._found:
                self._found[label] = self._lookup(label)
            return self._found[label]

    def _lookup(self, label: str) -> int | None:
        """:meth:`find` without its memo (the caller holds the lock)."""
        key = normalise_label(label)
        if not key:
            return None
        spaced = " ".join(label.replace("_", " ").split())
        forms = dict.fromkeys([label, spaced, key, key.capitalize(), key.title(), spaced.lower()])
        values = " ".join(_sparql(("literal", f, lang, "")) for f in forms for lang in ("", "en"))
        rows = self.select(f"SELECT ?s WHERE {{ VALUES ?l {{ {values} }} ?s ?p ?l . "
                           f"FILTER(isIRI(?s) && ?p IN (<{RDFS_LABEL}>, <{SKOS_PREF_LABEL}>, "
                           f"<{SKOS_ALT_LABEL}>)) }} LIMIT 50")
        for row in rows:
            term = _term(row["s"])
            if term is not None:
                node = self._node(term)
                return node
        rows = self.select(f"SELECT ?v WHERE {{ VALUES ?v {{ {values} }} ?s ?p ?v . "
                           f"FILTER(?p NOT IN ({_NAMES})) }} LIMIT 1")
        for row in rows:
            term = _term(row["v"])
            if term is not None:
                return self._node(term)
        return None

    def _store(self, node: int, out: bool, rows: Sequence[dict[str, dict[str, str]]], cut: bool
               ) -> tuple[IdArray, IdArray]:
        """Cache ``(relations, other ends)`` of ``node`` from its ``?p ?x`` rows (the caller holds the lock);
        name literals label the node instead of being edges."""
        rels: list[int] = []
        ends: list[int] = []
        labels: list[Term] = []
        comments: list[Term] = []
        for row in rows:
            other = _term(row["x"])
            pred = row["p"]["value"]
            if other is None:
                continue
            if other[0] == "literal" and pred in NAME_PREDICATES:
                if pred in (RDFS_LABEL, RDFS_COMMENT):
                    (labels if pred == RDFS_LABEL else comments).append(other)
                continue
            rels.append(self._rels(pred))
            ends.append(self._node(other))
        if out and not cut:  # every label and comment of the node was read
            if node not in self._labels:
                self._labels[node] = _best_label(labels) or _default_label(self._terms[node])
                self._unlabelled.discard(node)
            self._texts[node] = _best_label(comments) or ""
        result = (np.asarray(rels, dtype=np.int32), np.asarray(ends, dtype=np.int32))
        self._edges[(node, out)] = result
        if len(self._edges) > self.config.cache_nodes:
            self._edges.popitem(last=False)
        return result

    def _read(self, node: int, out: bool) -> tuple[IdArray, IdArray]:
        """``(relations, other ends)`` of ``node``'s outgoing (``out``) or incoming edges, cached."""
        with self._lock:
            found = self._edges.get((node, out))
            if found is not None:
                self._edges.move_to_end((node, out))
                return found
            term = self._check(node)
            limit = self.config.max_edges
            if out and term[0] != "iri":  # a literal is never a subject
                return self._store(node, out, [], False)
            pattern = f"{_sparql(term)} ?p ?x" if out else f"?x ?p {_sparql(term)}"
            # labels and comments come back too (one query): they name the node, they are not edges
            rows = self.select(f"SELECT ?p ?x WHERE {{ {pattern} }} LIMIT {limit + 1}")
            cut = len(rows) > limit
            if cut:
                rows = rows[:limit]
                self.truncated += 1
            return self._store(node, out, rows, cut)

    def prefetch(self, nodes: Iterable[int], out: bool | None = None) -> int:
        """Read the edge lists of the uncached ``nodes`` with one ``VALUES`` query per ``SPARQLConfig.batch``
        nodes and direction instead of one query per node: outgoing (``out``), incoming (``not out``) or
        both (``None``), the queries sent together (:meth:`select_many`). A node that may hold more than
        ``max_edges`` edges in a direction is read alone there (its list capped as :meth:`out_edges` caps
        it). Returns the queries sent."""
        with self._lock:
            plan = self._prefetch_plan(nodes, out)
            return self._prefetch_apply(plan, self.select_many([q for _, _, q in plan]))

    def _prefetch_plan(self, nodes: Iterable[int], out: bool | None) -> list[tuple[list[int], bool, str]]:
        """``(batch, direction, query)`` of every query :meth:`prefetch` sends (the caller holds the lock);
        a literal's empty out-list is stored at once."""
        dirs = (True, False) if out is None else (out,)
        todo = [v for v in dict.fromkeys(int(x) for x in nodes)
                if any((v, d) not in self._edges for d in dirs)]
        for v in todo:
            self._check(v)
        plan: list[tuple[list[int], bool, str]] = []
        for d in dirs:
            if d:  # a literal is never a subject
                for v in todo:
                    if self._terms[v][0] != "iri" and (v, True) not in self._edges:
                        self._store(v, True, [], False)
            left = [v for v in todo if (v, d) not in self._edges]
            step = self.config.batch
            for start in range(0, len(left), step):
                batch = left[start:start + step]
                values = " ".join(_sparql(self._terms[v]) for v in batch)
                pattern = "?n ?p ?x" if d else "?x ?p ?n"
                limit = self.config.max_edges * len(batch) if len(batch) > 1 else self.config.max_edges + 1
                plan.append((batch, d,
                             f"SELECT * WHERE {{ VALUES ?n {{ {values} }} {pattern} }} LIMIT {limit}"))
        return plan

    def _prefetch_apply(self, plan: list[tuple[list[int], bool, str]],
                        results: list[list[dict[str, dict[str, str]]]]) -> int:
        """Store the lists :meth:`_prefetch_plan`'s queries read (the caller holds the lock); queries sent,
        with the re-reads of lists a limit may have cut."""
        sent = len(plan)
        for (batch, d, _), rows in zip(plan, results, strict=True):
            if len(batch) == 1:
                if (batch[0], d) not in self._edges:
                    cut = len(rows) > self.config.max_edges
                    self.truncated += cut
                    self._store(batch[0], d, rows[:self.config.max_edges], cut)
                continue
            by_node: dict[int, list[dict[str, dict[str, str]]]] = {v: [] for v in batch}
            for row in rows:
                term = _term(row["n"])
                hit = self._node_ids.get(term) if term is not None else None
                if hit is not None and hit in by_node:
                    by_node[hit].append(row)
            full = len(rows) >= self.config.max_edges * len(batch)  # the limit cut some list: read alone
            for v, got in by_node.items():
                if (v, d) in self._edges:
                    continue
                if full or len(got) >= self.config.max_edges:
                    self._read(v, d)
                    sent += 1
                else:
                    self._store(v, d, got, False)
        return sent

    def select_many(self, queries: Sequence[str]) -> list[list[dict[str, dict[str, str]]]]:
        """:meth:`select` of every query, up to ``SPARQLConfig.parallel`` at a time (one round trip where
        the endpoint answers them side by side); the rows in the order of ``queries``."""
        if len(queries) <= 1 or self.config.parallel <= 1:
            return [self.select(q) for q in queries]
        with self._lock:
            self.round_trips += 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.config.parallel, thread_name_prefix="sparql")
            pool = self._pool
        return list(pool.map(self._select, queries))

    def out_edges(self, node: int) -> tuple[IdArray, IdArray]:
        return self._read(int(node), True)

    def in_edges(self, node: int) -> tuple[IdArray, IdArray]:
        return self._read(int(node), False)

    def degree(self, nodes: npt.ArrayLike, direction: Direction = "both") -> npt.NDArray[np.int64]:
        """Edges read per node (a hub's are cut at ``max_edges`` per direction); uncached lists are read
        in batches (:meth:`prefetch`)."""
        v = np.asarray(nodes, dtype=np.int64).reshape(-1).tolist()
        if len(v) > 1:
            self.prefetch(v, None if direction == "both" else direction == "out")
        out = [len(self.out_edges(x)[1]) if direction in ("out", "both") else 0 for x in v]
        inn = [len(self.in_edges(x)[1]) if direction in ("in", "both") else 0 for x in v]
        return np.asarray(out, dtype=np.int64) + np.asarray(inn, dtype=np.int64)

    def neighbors(self, nodes: npt.ArrayLike, direction: Direction = "both") -> IdArray:
        """Sorted unique nodes one hop away (uncached edge lists read in batches: :meth:`prefetch`)."""
        found: list[IdArray] = []
        wanted = np.unique(np.asarray(nodes, dtype=np.int64).reshape(-1)).tolist()
        if direction in ("out", "both"):
            self.prefetch(wanted, True)
        if direction in ("in", "both"):
            self.prefetch(wanted, False)
        for v in wanted:
            if direction in ("out", "both"):
                found.append(self.out_edges(v)[1])
            if direction in ("in", "both"):
                found.append(self.in_edges(v)[1])
        if not found:
            return np.zeros(0, dtype=np.int32)
        return np.unique(np.concatenate(found)).astype(np.int32)

    def edges_among(self, nodes: npt.ArrayLike, large: Collection[int] = ()) -> EdgeArrays:
        """Every edge among ``nodes``. ``large``: nodes known to have long edge lists (hubs). Without it,
        edges come from the cached lists where they are read, the rest from one query whose ``VALUES``
        blocks name the heads and the tails still unknown (the endpoint sends only those edges; what it
        sent is kept per head). With it, the other nodes' lists are read whole in batches
        (:meth:`prefetch`, kept for later calls) and the edges between two large nodes are asked pair by
        pair, so no long list is ever scanned or sent."""
        keep = np.unique(np.asarray(nodes, dtype=np.int64).reshape(-1)).tolist()
        with self._lock:
            for v in keep:
                self._check(v)
            members = set(keep)
            if large:
                big = [v for v in keep if v in large]
                plan = self._prefetch_plan([v for v in keep if v not in large], None)
                pairs = self._pairs_plan(big)
                results = self.select_many([q for _, _, q in plan] + [q for _, q in pairs])
                self._prefetch_apply(plan, results[:len(plan)])
                found = self._from_lists(keep, members)
                found.update(self._pairs_apply(big, pairs, results[len(plan):]))
            else:
                found = self._from_lists(keep, members)
                heads = [v for v in keep if (v, True) not in self._edges and self._terms[v][0] == "iri"]
                unknown = [v for v in heads if not self._among_known(v, members)]
                tails = [v for v in keep if (v, False) not in self._edges]
                if unknown and tails:
                    found.update(self._among_query(unknown, tails, members))
                    self._remember_among(unknown, members, found)
                for v in heads:
                    hit = self._among.get(v)
                    if hit is not None and hit[0] >= members:
                        found.update(e for e in hit[1] if e[2] in members)
        if not found:
            return (np.zeros(0, dtype=np.int32),) * 3
        h, r, t = (np.asarray(x, dtype=np.int32) for x in zip(*sorted(found), strict=True))
        return h, r, t

    def _from_lists(self, keep: list[int], members: set[int]) -> set[tuple[int, int, int]]:
        """The edges among ``members`` that the cached edge lists of ``keep`` hold."""
        found: set[tuple[int, int, int]] = set()
        for v in keep:
            if (v, True) in self._edges:
                r, t = self._edges[(v, True)]
                found.update((v, int(a), int(b)) for a, b in zip(r.tolist(), t.tolist(), strict=True)
                             if b in members)
            if (v, False) in self._edges:
                r, h = self._edges[(v, False)]
                found.update((int(b), int(a), v) for a, b in zip(r.tolist(), h.tolist(), strict=True)
                             if b in members)
        return found

    def _among_known(self, head: int, members: set[int]) -> bool:
        hit = self._among.get(head)
        return hit is not None and hit[0] >= members

    def _remember_among(self, heads: list[int], members: set[int], found: set[tuple[int, int, int]]) -> None:
        """Keep, per head, the targets asked about so far and the edges into them."""
        if len(self._among) + len(heads) > self.config.cache_nodes:
            self._among.clear()
        by_head: dict[int, list[tuple[int, int, int]]] = {v: [] for v in heads}
        for e in found:
            if e[0] in by_head:
                by_head[e[0]].append(e)
        for v, got in by_head.items():
            old = self._among.get(v)
            if old is None:
                self._among[v] = (frozenset(members), tuple(got))
            else:
                self._among[v] = (old[0] | members, tuple(set(old[1]) | set(got)))

    def _pairs_plan(self, nodes: list[int]) -> list[tuple[list[tuple[int, int]], str]]:
        """The ``VALUES (?h ?t)`` queries asking for the edges between two of ``nodes`` not asked before
        (the caller holds the lock)."""
        todo = [(a, b) for a in nodes for b in nodes
                if a != b and self._terms[a][0] == "iri" and (a, b) not in self._pair_edges]
        step = self.config.batch * 4
        plan: list[tuple[list[tuple[int, int]], str]] = []
        pragma = VIRTUOSO_ORDER if todo and self.is_virtuoso() else ""
        for start in range(0, len(todo), step):
            part = todo[start:start + step]
            values = " ".join(f"({_sparql(self._terms[a])} {_sparql(self._terms[b])})" for a, b in part)
            plan.append((part, f"{pragma}SELECT ?h ?p ?t WHERE {{ VALUES (?h ?t) {{ {values} }} ?h ?p ?t }}"))
        return plan

    def _pairs_apply(self, nodes: list[int], plan: list[tuple[list[tuple[int, int]], str]],
                     results: list[list[dict[str, dict[str, str]]]]) -> set[tuple[int, int, int]]:
        """Edges between any two of ``nodes``: the answers to :meth:`_pairs_plan`'s queries, kept, and
        those kept before."""
        for (part, _), rows in zip(plan, results, strict=True):
            got: dict[tuple[int, int], list[int]] = {pair: [] for pair in part}
            for row in rows:
                h, t = _term(row["h"]), _term(row["t"])
                hv = self._node_ids.get(h) if h is not None else None
                tv = self._node_ids.get(t) if t is not None else None
                if hv is not None and tv is not None and (hv, tv) in got:
                    got[(hv, tv)].append(self._rels(row["p"]["value"]))
            if len(self._pair_edges) + len(got) > self.config.cache_nodes:
                self._pair_edges.clear()
            self._pair_edges.update((pair, tuple(rels)) for pair, rels in got.items())
        found: set[tuple[int, int, int]] = set()
        for a in nodes:
            for b in nodes:
                found.update((a, r, b) for r in self._pair_edges.get((a, b), ()))
        return found

    def _among_query(self, heads: list[int], tails: list[int], members: set[int]
                     ) -> set[tuple[int, int, int]]:
        """Edges from ``heads`` to ``tails`` (one query per ``batch`` heads); name literals are left out."""
        found: set[tuple[int, int, int]] = set()
        to = " ".join(_sparql(self._terms[v]) for v in tails)
        step = self.config.batch
        for start in range(0, len(heads), step):
            values = " ".join(_sparql(self._terms[v]) for v in heads[start:start + step])
            rows = self.select(f"SELECT ?h ?p ?t WHERE {{ VALUES ?h {{ {values} }} ?h ?p ?t . "
                               f"VALUES ?t {{ {to} }} }}")
            for row in rows:
                h, t = _term(row["h"]), _term(row["t"])
                pred = row["p"]["value"]
                if h is None or t is None or (t[0] == "literal" and pred in NAME_PREDICATES):
                    continue
                hv, tv = self._node_ids.get(h), self._node_ids.get(t)
                if hv is not None and tv is not None and tv in members:
                    found.add((hv, self._rels(pred), tv))
        return found

    def close(self) -> None:
        """Close the HTTP connections (and the threads of :meth:`select_many`)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._client.close()

    def usage(self) -> dict[str, Any]:
        """Requests, round trips (queries sent side by side count once), retries and failures so far, nodes
        and relations seen, truncated edge lists."""
        return {**self.stats.snapshot(), "round_trips": self.round_trips, "nodes_seen": len(self._terms),
                "relations_seen": len(self._rels), "truncated_edge_lists": self.truncated}
