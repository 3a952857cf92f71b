"""RDF 1.1 N-Triples (W3C recommendation, 2014) → ``CSRGraph``.

Every line holds one triple ``subject predicate object .`` (IRIs ``<…>``, blank nodes ``_:x``, literals
``"…"`` with an optional ``@lang`` or ``^^<datatype>``; escapes ``\\t \\b \\n \\r \\f \\" \\' \\\\`` and
``\\uXXXX``/``\\UXXXXXXXX``), or is blank, or a ``#`` comment. IRIs and blank nodes become nodes, and so
do literal objects (one node per distinct literal, labelled by its lexical form). A node's label is its
``rdfs:label`` (English or untagged preferred), else the IRI's local name (after the last ``#`` or ``/``,
percent-decoded, ``_`` as space). ``rdfs:label`` and ``rdfs:comment`` triples with literal objects set a
node's label and text instead of becoming edges; the node's other ``rdfs:label``s (English or untagged)
and its ``skos:prefLabel``/``skos:altLabel`` literals become its aliases, not edges. A relation is named by
its predicate's local name.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.base import ArrayGraph, KnowledgeGraph
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import Interner, numbered_lines, open_text, require_file

__all__ = ["NAME_PREDICATES", "SKOS_ALT_LABEL", "iri_local_name", "label_rank", "literal_syntax",
           "load_ntriples", "parse_ntriples_line", "write_ntriples"]

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
RDFS_COMMENT = "http://www.w3.org/2000/01/rdf-schema#comment"
SKOS_PREF_LABEL = "http://www.w3.org/2004/02/skos/core#prefLabel"
SKOS_ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"
NAME_PREDICATES = (RDFS_LABEL, RDFS_COMMENT, SKOS_PREF_LABEL, SKOS_ALT_LABEL)
"""Predicates whose literal objects name or describe a node instead of being edges."""

_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_IRI = rf"<((?:[^\x00-\x20<>\"{{}}|^`\\]|{_UCHAR})*)>"
_PN_START = ("A-Za-z0-9_\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
             "\u2070-\U000effff")
_PN = _PN_START + r"\-\u00b7\u0300-\u036f\u203f-\u2040"
_BNODE = rf"_:([{_PN_START}](?:[{_PN}.]*[{_PN}])?)"
_LITERAL = (rf"\"((?:[^\"\\\n\r]|\\[tbnrf\"'\\]|{_UCHAR})*)\""
            rf"(?:\^\^{_IRI}|@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*))?")
_WS = r"[ \t]*"
_LINE = re.compile(
    rf"{_WS}(?:{_IRI}|{_BNODE}){_WS}{_IRI}{_WS}(?:{_IRI}|{_BNODE}|{_LITERAL}){_WS}\.{_WS}(?:#.*)?"
)
_BLANK = re.compile(rf"{_WS}(?:#.*)?")
_ESCAPE = re.compile(rf"\\[tbnrf\"'\\]|{_UCHAR}")
_ECHARS = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}

Term = tuple[str, str, str, str]
"""``(kind, value, lang, datatype)``: kind ``iri``, ``bnode`` or ``literal``; value unescaped."""


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        return _ECHARS[s[1]] if len(s) == 2 else chr(int(s[2:], 16))

    return _ESCAPE.sub(repl, text)


def parse_ntriples_line(line: str) -> tuple[Term, str, Term] | None:
    """``(subject, predicate IRI, object)`` of one N-Triples line, ``None`` for a blank or comment line;
    raises ``ValueError`` for anything else."""
    m = _LINE.fullmatch(line)
    if m is None:
        if _BLANK.fullmatch(line):
            return None
        raise ValueError("not an N-Triples triple 'subject predicate object .'")
    s_iri, s_bn, pred, o_iri, o_bn, o_lex, o_dt, o_lang = m.groups()
    subj: Term = ("iri", _unescape(s_iri), "", "") if s_iri is not None else ("bnode", s_bn, "", "")
    if o_iri is not None:
        obj: Term = ("iri", _unescape(o_iri), "", "")
    elif o_bn is not None:
        obj = ("bnode", o_bn, "", "")
    else:
        obj = ("literal", _unescape(o_lex), (o_lang or "").lower(), _unescape(o_dt) if o_dt else "")
    return subj, _unescape(pred), obj


def iri_local_name(iri: str) -> str:
    """The readable tail of an IRI: after the last ``#`` or ``/`` (or ``:``), ``_`` as space, then
    percent-decoded (so ``%5F`` is a kept underscore); the whole IRI when that is empty."""
    cut = max(iri.rfind("#"), iri.rfind("/"))
    if cut < 0:
        cut = iri.rfind(":")
    tail = unquote(iri[cut + 1 :].replace("_", " ")).strip()
    return tail or iri


def _key(term: Term) -> str:
    """An interning key that no two distinct RDF terms share."""
    return "\x00".join(term)


def _default_label(term: Term) -> str:
    kind, value, _, _ = term
    return iri_local_name(value) if kind == "iri" else (f"_:{value}" if kind == "bnode" else value)


def label_rank(lang: str) -> int:
    """Preference of an ``rdfs:label`` by language: untagged or English first."""
    return 0 if lang in ("", "en") or lang.startswith("en-") else 1


def load_ntriples(path: str | Path, name: str | None = None) -> CSRGraph:
    """Load an N-Triples file (``.nt`` or ``.nt.gz``); a line that is not a triple, blank or comment
    raises ``DataError`` naming file and line."""
    p = require_file(path)
    nodes, rels = Interner(), Interner()
    h: list[int] = []
    r: list[int] = []
    t: list[int] = []
    best_label: dict[int, tuple[int, str]] = {}
    names: dict[int, dict[str, None]] = {}
    comments: dict[int, str] = {}
    for lineno, line in numbered_lines(p):
        try:
            parsed = parse_ntriples_line(line)
        except ValueError as exc:
            raise DataError(f"{exc}: {line[:80]!r}", p, lineno) from exc
        if parsed is None:
            continue
        subj, pred, obj = parsed
        s = nodes(_key(subj), _default_label(subj))
        if obj[0] == "literal" and pred in NAME_PREDICATES:
            if pred == RDFS_COMMENT:
                comments.setdefault(s, obj[1])
                continue
            rank = label_rank(obj[2])
            if rank == 0:
                names.setdefault(s, {})[obj[1]] = None
            if pred == RDFS_LABEL and (s not in best_label or rank < best_label[s][0]):
                best_label[s] = (rank, obj[1])
            continue
        h.append(s)
        r.append(rels(pred, iri_local_name(pred)))
        t.append(nodes(_key(obj), _default_label(obj)))
    labels = list(nodes.labels)
    for node, (_, label) in best_label.items():
        labels[node] = label
    texts = [comments.get(i, "") for i in range(len(labels))] if comments else None
    return CSRGraph.from_arrays(
        labels, rels.labels, np.asarray(h, dtype=np.int64), np.asarray(r, dtype=np.int64),
        np.asarray(t, dtype=np.int64), texts, name=name if name is not None else p.name.split(".")[0],
        aliases=[(v, a) for v, forms in names.items() for a in forms],
    )


def literal_syntax(text: str) -> str:
    """``text`` as a quoted, escaped literal (N-Triples and SPARQL share the syntax)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def write_ntriples(kg: KnowledgeGraph, path: str | Path, base: str = "urn:kgwise:") -> Path:
    """Write ``kg`` as N-Triples (e.g. to load it into a triple store): node ``i`` is ``<{base}node:i>``
    with its label as ``rdfs:label``, its aliases as ``skos:altLabel`` and its text, if any, as
    ``rdfs:comment``; relation ``r`` is
    ``<{base}relation:NAME>`` (percent-encoded, ``_`` too, which the local-name rule would read as a
    space). :func:`load_ntriples` reads it back as the same graph. A ``.gz`` path is gzipped."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rels = [f"<{base}relation:{quote(kg.relation_name(r), safe='').replace('_', '%5F')}>"
            for r in range(kg.num_relations)]
    with open_text(out, "w") as f:
        for v in range(kg.num_nodes):
            node = f"<{base}node:{v}>"
            f.write(f"{node} <{RDFS_LABEL}> {literal_syntax(kg.label(v))} .\n")
            for alias in kg.aliases(v) if isinstance(kg, ArrayGraph) else ():
                f.write(f"{node} <{SKOS_ALT_LABEL}> {literal_syntax(alias)} .\n")
            comment = kg.text(v)
            if comment:
                f.write(f"{node} <{RDFS_COMMENT}> {literal_syntax(comment)} .\n")
            for r, t in zip(*kg.out_edges(v), strict=True):
                f.write(f"{node} {rels[r]} <{base}node:{t}> .\n")
    return out
