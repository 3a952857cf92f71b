"""ConceptNet 5 → ``CSRGraph``: the official assertions CSV and the CSQA choice-triple slice.

Both keep English concepts only and strip a concept URI ``/c/en/term[/pos[/sense…]]`` to ``term`` with
``_`` as space. With a KagNet merge file (``merge_relation_kagnet.txt``: one group per line, members
separated by ``/``, the group named by its first member; a member written ``*rel`` is reversed when
merged) relations are merged into the 17 KagNet/QA-GNN groups, a reversed member swaps head and tail, and
relations outside every group are dropped, as KagNet does. Self-loops (which stripping senses can create)
are dropped, as in QA-GNN's graph construction. Without a merge file the ConceptNet relation names are
kept (``IsA``, ``dbpedia/genre``).

Surface forms are kept as aliases: an assertion's surface text ``[[a revolving door]] is in [[a bank]]``
names its start and end concepts (``surfaceText`` of the CSV's info, ``surface`` of the slice); a form
differing from the concept's label (a leading article dropped: ``complete a job`` for ``complete job``,
``New York`` for ``new york`` is no alias) becomes one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import Interner, numbered_lines, require_file

__all__ = [
    "RelationMerge",
    "concept_label",
    "load_conceptnet_csv",
    "load_conceptnet_jsonl_triples",
    "read_merge_file",
]

_SURFACE = re.compile(r"\[\[(.+?)\]\]")
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)

RelationMerge = dict[str, tuple[str, bool]]
"""Lower-case ConceptNet relation → (merged group name, reversed?)."""


def read_merge_file(path: str | Path) -> RelationMerge:
    """Parse a KagNet relation-merging file; raises ``DataError`` naming file and line when malformed."""
    p = require_file(path)
    merge: RelationMerge = {}
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        members = line.strip().lower().split("/")
        if not all(m.lstrip("*") for m in members) or members[0].startswith("*"):
            raise DataError(f"malformed relation group {line.strip()!r}", p, lineno)
        group = members[0]
        for m in members:
            name = m.lstrip("*")
            if name in merge:
                raise DataError(f"relation {name!r} is in two groups", p, lineno)
            merge[name] = (group, m.startswith("*"))
    if not merge:
        raise DataError("no relation groups", p)
    return merge


def concept_label(uri: str) -> str | None:
    """``/c/en/ice_cream/n/wn/food`` → ``ice cream``; ``None`` for a non-English or malformed URI."""
    parts = uri.split("/", 4)
    if len(parts) < 4 or parts[0] or parts[1] != "c" or parts[2] != "en" or not parts[3]:
        return None
    return parts[3].replace("_", " ")


def _shares(concept: str, form: str) -> int:
    """Words ``concept`` and ``form`` share, compared by their first four letters."""
    stems = {w[:4] for w in concept.lower().replace("_", " ").split()}
    return sum(w[:4] in stems for w in form.lower().split())


class _Builder:
    """Interns (head, relation, tail) label triples, merging relations and dropping self-loops."""

    def __init__(self, merge: RelationMerge | None) -> None:
        self.merge = merge
        self.nodes = Interner()
        self.rels = Interner()
        self.h: list[int] = []
        self.r: list[int] = []
        self.t: list[int] = []
        self.aliases: dict[str, dict[str, None]] = {}

    def surface(self, head: str, tail: str, text: str) -> None:
        """Record the two ``[[…]]`` forms of a surface text as aliases of ``head`` and ``tail``. The text
        may name them in either order ("[[an oven]] is for [[roasting]]" for *roast → oven*): a form goes
        to the concept it shares a word with (a word's first four letters, "roas"), and a form that shares
        none with its concept is no alias (without this, 263 of the CSQA slice's concepts were aliases of
        another: *milk* of *refrigerator*)."""
        spans = _SURFACE.findall(text)
        if len(spans) != 2:
            return
        forms = [" ".join(_ARTICLE.sub("", s.strip()).split()) for s in spans]
        swapped = _shares(head, forms[1]) + _shares(tail, forms[0])
        if swapped > _shares(head, forms[0]) + _shares(tail, forms[1]):
            forms.reverse()
        for concept, form in zip((head, tail), forms, strict=True):
            if form and form.lower() != concept.lower() and _shares(concept, form):
                self.aliases.setdefault(concept, {})[form] = None

    def add(self, head: str, rel: str, tail: str, surface: str | None = None) -> None:
        if surface:
            self.surface(head, tail, surface)
        if self.merge is not None:
            found = self.merge.get(rel.lower())
            if found is None:
                return
            rel, reverse = found
            if reverse:
                head, tail = tail, head
        if head == tail:
            return
        self.h.append(self.nodes(head))
        self.r.append(self.rels(rel))
        self.t.append(self.nodes(tail))

    def graph(self, name: str) -> CSRGraph:
        return CSRGraph.from_arrays(
            self.nodes.labels,
            self.rels.labels,
            np.asarray(self.h, dtype=np.int64),
            np.asarray(self.r, dtype=np.int64),
            np.asarray(self.t, dtype=np.int64),
            name=name,
            aliases=[(self.nodes.ids[c], a) for c, forms in self.aliases.items() if c in self.nodes.ids
                     for a in forms],
        )


def _merge(merge_file: str | Path | None) -> RelationMerge | None:
    return None if merge_file is None else read_merge_file(merge_file)


def load_conceptnet_csv(path: str | Path, merge_file: str | Path | None = None) -> CSRGraph:
    """Load the official ConceptNet 5 assertions CSV (``.csv`` or ``.csv.gz``; tab-separated: assertion
    URI, relation URI, start URI, end URI, JSON info), keeping edges whose both ends are English.

    Raises ``DataError`` naming file and line for a line without five fields, a relation that is not
    ``/r/…``, a start/end that is not a concept ``/c/…``, or info that is not a JSON object.
    """
    p = require_file(path)
    b = _Builder(_merge(merge_file))
    for lineno, line in numbered_lines(p):
        if not line:
            continue
        f = line.split("\t")
        if len(f) != 5:
            raise DataError(f"expected 5 tab-separated fields, got {len(f)}", p, lineno)
        uri, rel, start, end, info = f
        if not uri.startswith("/a/[") or not rel.startswith("/r/") or len(rel) < 4:
            raise DataError(f"malformed assertion or relation URI {uri[:60]!r} {rel!r}", p, lineno)
        if rel == "/r/ExternalURL":
            continue  # links a concept to a web page, not to another concept
        if not (start.startswith("/c/") and end.startswith("/c/") and info.startswith("{")
                and info.endswith("}")):
            raise DataError("start/end must be concept URIs /c/… and info a JSON object", p, lineno)
        if not (start.startswith("/c/en/") and end.startswith("/c/en/")):
            continue
        head, tail = concept_label(start), concept_label(end)
        if head is None or tail is None:
            raise DataError(f"malformed concept URI {start!r} or {end!r}", p, lineno)
        surface = None
        if '"surfaceText"' in info:
            try:
                found = json.loads(info).get("surfaceText")
            except json.JSONDecodeError as exc:
                raise DataError(f"info is not valid JSON: {exc.msg}", p, lineno) from exc
            surface = found if isinstance(found, str) else None
        b.add(head, rel[3:].rstrip("/"), tail, surface)
    return b.graph("conceptnet")


def _records(path: Path) -> Iterable[tuple[int | None, Any]]:
    """``(line, record)``: a JSON array file gives its items (line ``None``: the array is one value),
    a JSON-lines file one record per non-empty line."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON: {exc.msg}", path, exc.lineno) from exc
        return ((None, rec) for rec in data)
    out: list[tuple[int | None, Any]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON: {exc.msg}", path, lineno) from exc
    return out


def _line_of_id(path: Path, qid: str) -> int | None:
    needle = f'"{qid}"'
    for lineno, line in numbered_lines(path):
        if needle in line:
            return lineno
    return None


def load_conceptnet_jsonl_triples(
    paths: str | Path | Sequence[str | Path], merge_file: str | Path | None = None
) -> CSRGraph:
    """Load the real ConceptNet triples of the CSQA choice-triple slice
    (``conceptnet/csqa_choice_triples_jessionlin/{dev,test}_data.json``).

    ``paths`` is a file, a directory (its ``*.json``/``*.jsonl`` files, sorted) or a list of files. Each
    record is a CSQA question whose choices carry ``"triple": [[head, relation, tail], …]``. Raises
    ``DataError`` naming the file and line (for a one-line JSON array: line 1 and the question id) of a
    malformed record.
    """
    if isinstance(paths, str | Path):
        root = Path(paths)
        files = sorted([*root.glob("*.json"), *root.glob("*.jsonl")]) if root.is_dir() else [root]
        if root.is_dir() and not files:
            raise DataError("no *.json or *.jsonl files", root)
    else:
        files = [Path(x) for x in paths]
    b = _Builder(_merge(merge_file))
    for path in files:
        require_file(path)
        for k, (lineno, rec) in enumerate(_records(path)):
            try:
                qid = str(rec.get("id", f"#{k}")) if isinstance(rec, dict) else f"#{k}"
                for choice in rec["question"]["choices"]:
                    triples = choice.get("triple") or ()
                    surface = choice.get("surface") if len(triples) == 1 else None
                    for triple in triples:
                        head, rel, tail = triple
                        if not all(isinstance(x, str) and x.strip() for x in (head, rel, tail)):
                            raise ValueError(f"empty or non-string field in {triple!r}")
                        b.add(head.replace("_", " "), rel, tail.replace("_", " "),
                              surface if isinstance(surface, str) else None)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                where = lineno if lineno is not None else _line_of_id(path, qid)
                raise DataError(f"question {qid}: malformed choice triples ({exc})", path, where) from exc
    return b.graph("conceptnet-slice")
