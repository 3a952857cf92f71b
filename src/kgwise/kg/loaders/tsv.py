"""Tab-separated ``head<TAB>relation<TAB>tail`` triples (e.g. the WebQSP Freebase fragment) → ``CSRGraph``,
with an optional alias file of ``label<TAB>alias`` lines.

Without a :class:`~kgwise.kg.clean.BuildReport` a broken line raises ``DataError`` naming file and line.
With one (``kgwise kg build``) it is counted and skipped (or raises when the report is ``strict``), and so
are the other findings: duplicate triples and self-loops (dropped), an alias for a label no triple uses,
an alias listed for two labels (kept on neither). A first line that names the columns (every field a
column word such as ``head``, ``relation``, ``tail``, ``subject``, ``predicate``, ``object``) is a header,
never a triple: skipped, and reported (or warned about without a report).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.clean import BuildReport
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import Interner, numbered_lines, require_file

__all__ = ["HEADER_WORDS", "load_tsv", "read_alias_file"]

HEADER_WORDS = frozenset({
    "head", "relation", "tail", "subject", "predicate", "object", "source", "target", "from", "to", "rel",
    "relationship", "edge", "type", "h", "r", "t", "s", "p", "o", "entity", "entity1", "entity2", "node1",
    "node2", "start", "end", "label", "head_entity", "tail_entity", "src", "dst", "property", "value",
})
"""Column names: a first line made only of these (any case, ``:``/``_`` ignored) is a header row."""


def _is_header(fields: list[str]) -> bool:
    return all(f.strip().lower().strip(":_ ").replace(" ", "_") in HEADER_WORDS for f in fields)


def read_alias_file(path: str | Path, report: BuildReport | None = None) -> dict[str, list[str]]:
    """``label → aliases`` from ``label<TAB>alias[<TAB>alias…]`` lines (blank lines skipped). A line
    without a label and at least one alias raises ``DataError`` naming file and line (with ``report``:
    counted and skipped). With ``report``, an alias listed for two labels is reported and kept on
    neither."""
    p = require_file(path)
    out: dict[str, list[str]] = {}
    where: dict[str, list[tuple[str, int]]] = {}
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) < 2 or not f[0].strip() or not all(x.strip() for x in f[1:]):
            why = f"expected label<TAB>alias[<TAB>alias…] with no empty field: {line[:80]!r}"
            if report is None:
                raise DataError(why, p, lineno)
            report.broken_line(p, lineno, why)
            continue
        out.setdefault(f[0], []).extend(f[1:])
        for alias in f[1:]:
            where.setdefault(alias.strip().casefold(), []).append((f[0], lineno))
    if report is not None:
        for alias, uses in where.items():
            owners = sorted({label for label, _ in uses})
            if len(owners) > 1:
                report.alias_conflicts.append(
                    f"{p}:{uses[0][1]}: alias {alias!r} given to " + ", ".join(
                        f"{label!r} (line {line})" for label, line in uses))
                for label in owners:
                    out[label] = [a for a in out[label] if a.strip().casefold() != alias]
    return out


def load_tsv(path: str | Path, name: str | None = None, aliases: str | Path | None = None,
             report: BuildReport | None = None) -> CSRGraph:
    """Load one triple per line; node labels and relation names are the fields verbatim (``#`` is not a
    comment: Freebase names may start with it). Blank lines are skipped. A line without exactly three
    non-empty fields raises ``DataError`` naming file and line; ``aliases``: an alias file
    (:func:`read_alias_file`); a label it names that no triple uses raises ``DataError``. With ``report``
    these are counted and skipped instead, and duplicate triples and self-loops are reported and dropped
    (see the module docstring)."""
    p = require_file(path)
    alias_of = read_alias_file(aliases, report) if aliases is not None else {}
    nodes, rels = Interner(), Interner()
    h: list[int] = []
    r: list[int] = []
    t: list[int] = []
    seen: dict[tuple[int, int, int], int] = {}
    first = True
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        f = line.split("\t")
        if first:
            first = False
            if len(f) == 3 and _is_header(f):
                if report is not None:
                    report.headers.append(f"{p}:{lineno}: {line[:80]!r}")
                else:
                    warnings.warn(f"{p}:{lineno}: header row {line[:80]!r} skipped", stacklevel=2)
                continue
        if len(f) != 3:
            why = f"expected head<TAB>relation<TAB>tail, got {len(f)} field(s): {line[:80]!r}"
        else:
            empty = [name for name, x in zip(("head", "relation", "tail"), f, strict=True) if not x.strip()]
            why = f"empty {' and '.join(empty)}: {line[:80]!r}" if empty else ""
        if why:
            if report is None:
                raise DataError(why, p, lineno)
            report.broken_line(p, lineno, why)
            continue
        triple = (nodes(f[0]), rels(f[1]), nodes(f[2]))
        if report is not None:
            if triple[0] == triple[2]:
                report.self_loops.append(f"{p}:{lineno}: {line[:80]!r}")
                continue
            if triple in seen:
                report.duplicates.append(f"{p}:{lineno}: {line[:80]!r} (as line {seen[triple]})")
                continue
            seen[triple] = lineno
        h.append(triple[0])
        r.append(triple[1])
        t.append(triple[2])
    missing = [label for label in alias_of if label not in nodes.ids]
    if missing and report is None:
        raise DataError(f"{len(missing)} label(s) are in no triple of {p}, e.g. {missing[0]!r}", aliases)
    if report is not None:
        report.dangling.extend(f"{aliases}: {label!r} (aliases {', '.join(map(repr, alias_of[label]))}) "
                               f"is in no triple of {p}" for label in missing)
    return CSRGraph.from_arrays(
        nodes.labels, rels.labels, np.asarray(h, dtype=np.int64), np.asarray(r, dtype=np.int64),
        np.asarray(t, dtype=np.int64), name=name if name is not None else p.stem,
        aliases=[(nodes.ids[label], a) for label, names in alias_of.items() if label in nodes.ids
                 for a in names],
    )
