"""Tab-separated ``head<TAB>relation<TAB>tail`` triples (e.g. the WebQSP Freebase fragment) → ``CSRGraph``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import Interner, numbered_lines, require_file

__all__ = ["load_tsv"]


def load_tsv(path: str | Path, name: str | None = None) -> CSRGraph:
    """Load one triple per line; node labels and relation names are the fields verbatim (``#`` is not a
    comment: Freebase names may start with it). Blank lines are skipped. A line without exactly three
    non-empty fields raises ``DataError`` naming file and line."""
    p = require_file(path)
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
    return CSRGraph.from_arrays(
        nodes.labels, rels.labels, np.asarray(h, dtype=np.int64), np.asarray(r, dtype=np.int64),
        np.asarray(t, dtype=np.int64), name=name if name is not None else p.stem,
    )
