"""Tab-separated ``head<TAB>relation<TAB>tail`` triples (e.g. the WebQSP Freebase fragment) → ``CSRGraph``,
with an optional alias file of ``label<TAB>alias`` lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import Interner, numbered_lines, require_file

__all__ = ["load_tsv", "read_alias_file"]


def read_alias_file(path: str | Path) -> dict[str, list[str]]:
    """``label → aliases`` from ``label<TAB>alias[<TAB>alias…]`` lines (blank lines skipped); a line
    without a label and at least one alias raises ``DataError`` naming file and line."""
    p = require_file(path)
    out: dict[str, list[str]] = {}
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) < 2 or not f[0].strip() or not all(x.strip() for x in f[1:]):
            raise DataError(f"expected label<TAB>alias[<TAB>alias…] with no empty field: {line[:80]!r}", p,
                            lineno)
        out.setdefault(f[0], []).extend(f[1:])
    return out


def load_tsv(path: str | Path, name: str | None = None, aliases: str | Path | None = None) -> CSRGraph:
    """Load one triple per line; node labels and relation names are the fields verbatim (``#`` is not a
    comment: Freebase names may start with it). Blank lines are skipped. A line without exactly three
    non-empty fields raises ``DataError`` naming file and line. ``aliases``: an alias file
    (:func:`read_alias_file`); a label it names that no triple uses raises ``DataError``."""
    p = require_file(path)
    alias_of = read_alias_file(aliases) if aliases is not None else {}
    nodes, rels = Interner(), Interner()
    h: list[int] = []
    r: list[int] = []
    t: list[int] = []
    for lineno, line in numbered_lines(p):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 3:
            raise DataError(f"expected head<TAB>relation<TAB>tail, got {len(f)} field(s): {line[:80]!r}", p,
                            lineno)
        empty = [name for name, x in zip(("head", "relation", "tail"), f, strict=True) if not x.strip()]
        if empty:
            raise DataError(f"empty {' and '.join(empty)}: {line[:80]!r}", p, lineno)
        h.append(nodes(f[0]))
        r.append(rels(f[1]))
        t.append(nodes(f[2]))
    missing = [label for label in alias_of if label not in nodes.ids]
    if missing:
        raise DataError(f"{len(missing)} label(s) are in no triple of {p}, e.g. {missing[0]!r}", aliases)
    return CSRGraph.from_arrays(
        nodes.labels, rels.labels, np.asarray(h, dtype=np.int64), np.asarray(r, dtype=np.int64),
        np.asarray(t, dtype=np.int64), name=name if name is not None else p.stem,
        aliases=[(nodes.ids[label], a) for label, names in alias_of.items() for a in names],
    )
