"""A graph cleaned at build, every change counted and named (``kgwise kg build``, ``--report FILE``).

A user's graph as found in the wild names one thing several ways: an alias that is also a node's label
("USA" beside "United States" aliased "USA"), and labels that differ only in case, accents, hyphens or ae/oe
spelling ("germany", "Zurich" beside "Germany", "Zürich"). Each such node stays a separate one-fact node
unless merged, and a question about it reaches one fact instead of all of them. :func:`merge_names` merges
them: a node whose label (compared by :func:`merge_key`: case, accents and ``-``/``_`` against spaces
ignored) equals another node's alias joins that node; nodes whose labels compare equal join the one with the
most edges (the lowest id on a tie). The merged labels become aliases of the node they joined. An alias two
nodes share is never a reason to merge: it is reported (:attr:`BuildReport.alias_conflicts`).

:class:`BuildReport` collects what a loader and the merge found — a header row, broken lines (file:line),
duplicate triples and self-loops (dropped), dangling aliases (an alias for a label no triple uses),
aliases given to two nodes (kept on neither) and merges — and, when ``strict``, stops at the first
broken line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.csr import CSRGraph
from kgwise.kg.text import fold_key

__all__ = ["BuildReport", "merge_key", "merge_names"]


@dataclass(slots=True)
class BuildReport:
    """What building a graph found and changed; ``strict``: a broken line raises ``DataError`` instead of
    being counted and skipped. Each list entry is a line for a person (``file:line: what``)."""

    strict: bool = False
    headers: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    self_loops: list[str] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    alias_conflicts: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)

    def broken_line(self, path: str | Path, line: int, why: str) -> None:
        """Count a line that cannot be read (or raise, when ``strict``)."""
        if self.strict:
            raise DataError(f"{why} (--strict stops at a broken line)", path, line)
        self.broken.append(f"{path}:{line}: {why}")

    def counts(self) -> dict[str, int]:
        """How many of each finding."""
        return {"header_rows": len(self.headers), "broken_lines": len(self.broken),
                "duplicate_triples": len(self.duplicates), "self_loops": len(self.self_loops),
                "dangling_aliases": len(self.dangling), "alias_conflicts": len(self.alias_conflicts),
                "merged_nodes": len(self.merged)}

    def summary(self) -> str:
        """One line: the non-zero counts, or ``clean``."""
        parts = [f"{v} {k.replace('_', ' ')}" for k, v in self.counts().items() if v]
        return ", ".join(parts) if parts else "clean"

    def to_text(self) -> str:
        """Every finding, grouped, for ``--report FILE``."""
        out: list[str] = []
        groups: list[tuple[str, list[str]]] = [
            ("header rows skipped", self.headers), ("broken lines skipped", self.broken),
            ("duplicate triples dropped", self.duplicates), ("self-loops dropped", self.self_loops),
            ("dangling aliases skipped", self.dangling), ("aliases given to two nodes (kept on neither)",
                                                         self.alias_conflicts),
            ("nodes merged", self.merged)]
        for title, items in groups:
            out.append(f"# {title}: {len(items)}")
            out.extend(items)
        return "\n".join(out) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts(), "headers": self.headers, "broken": self.broken,
                "duplicates": self.duplicates, "self_loops": self.self_loops, "dangling": self.dangling,
                "alias_conflicts": self.alias_conflicts, "merged": self.merged}


_SPACES = re.compile(r"[\s_\-]+")


def merge_key(name: str) -> str:
    """What two names that mean one node share: the name in lower case, without accents, British *ae*/*oe*
    spelt *e* (:func:`~kgwise.kg.text.fold_key`: "Oedema" = "edema"), with runs of spaces, ``_`` and ``-``
    as one space ("Cholic-acid" = "cholic acid", "Zürich" = "zurich"); other
    punctuation counts ("Google+" is not "Google", "C++" not "C")."""
    return _SPACES.sub(" ", fold_key(name.lower())).strip()


_key = merge_key


def merge_names(graph: CSRGraph, report: BuildReport) -> CSRGraph:
    """``graph`` with nodes that name one thing merged (see the module docstring), each merge listed in
    ``report``; the graph itself when nothing merges."""
    n = graph.num_nodes
    labels = list(graph.labels)
    alias_nodes, alias_names = graph.alias_pairs()
    owners: dict[str, set[int]] = {}
    for node, name in zip(alias_nodes.tolist(), alias_names, strict=True):
        k = _key(name)
        if k:
            owners.setdefault(k, set()).add(int(node))
    degree = graph.degree(np.arange(n, dtype=np.int64))
    parent = list(range(n))

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    why: dict[int, str] = {}
    by_label: dict[str, list[int]] = {}
    for v, label in enumerate(labels):
        k = _key(label)
        if k:
            by_label.setdefault(k, []).append(v)
    for group in by_label.values():
        if len(group) > 1:
            keep = max(group, key=lambda v: (int(degree[v]), -v))
            for v in group:
                if v != keep:
                    parent[root(v)] = root(keep)
                    why[v] = "label differs only in case, accents, hyphens or ae/oe spelling"
    for k, group in by_label.items():
        own = owners.get(k, set()) - set(group)
        if len(own) == 1:
            target = root(next(iter(own)))
            for v in group:
                if root(v) != target:
                    parent[root(v)] = target
                    why.setdefault(v, "label is an alias of")
    if not why:
        return graph
    roots = [root(v) for v in range(n)]
    kept = [v for v in range(n) if roots[v] == v]
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[kept] = np.arange(len(kept), dtype=np.int64)
    for v in sorted(why):
        report.merged.append(f"{labels[v]!r} → {labels[roots[v]]!r} ({why[v]})")
    h, r, t = graph.all_edges()
    h2, t2 = new_id[np.asarray(roots)[h]], new_id[np.asarray(roots)[t]]
    loops = (h2 == t2) & (h != t)
    for a, rel, b in zip(h[loops].tolist(), r[loops].tolist(), t[loops].tolist(), strict=True):
        report.self_loops.append(f"{labels[a]!r} -[{graph.relation_name(rel)}]-> {labels[b]!r}: its two "
                                 "ends merged")
    keep_edge = ~loops
    aliases = [(int(new_id[roots[int(v)]]), name) for v, name in zip(alias_nodes.tolist(), alias_names,
                                                                      strict=True)]
    aliases += [(int(new_id[roots[v]]), labels[v]) for v in why]
    texts = [graph.text(v) for v in kept] if any(graph.text(v) for v in range(n)) else None
    return CSRGraph.from_arrays([labels[v] for v in kept], list(graph.relations), h2[keep_edge],
                                r[keep_edge], t2[keep_edge], texts, graph.name, aliases)
