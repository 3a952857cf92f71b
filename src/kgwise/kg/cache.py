"""Graphs built from data files, cached as ``.npz`` under :func:`kgwise.config.cache_dir` while neither
the files nor kgwise's graph-building code change. Each edit of a graph's sources (or each kgwise
upgrade that changes its loaders) makes a new entry, so only the :data:`KEEP` most recently used entries
of one graph are kept: a large KG edited a few times does not fill the disk."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

from kgwise.config import cache_dir
from kgwise.files import file_stamp, short_hash, source_fingerprint
from kgwise.kg.csr import CSRGraph

__all__ = ["KEEP", "cached_graph", "graph_key"]

KEEP = 2
"""Entries kept per graph: the one just used and one older (two checkouts or versions side by side)."""


def graph_key(sources: Sequence[Path]) -> str:
    """A hash of the sources' stamps (path, size, mtime) and of the source of ``kgwise.kg.loaders`` and
    ``kgwise.kg.csr``: it changes with other data or a changed loader."""
    return short_hash({"sources": [file_stamp(p) for p in sources],
                       "code": source_fingerprint("kgwise.kg.loaders", "kgwise.kg.csr")})


def cached_graph(name: str, sources: Sequence[Path], build: Callable[[], CSRGraph],
                 use_cache: bool = True) -> CSRGraph:
    """The graph ``build`` makes from ``sources`` (files or directories), reopened from
    ``<cache>/<name>-<key>.npz`` when it was built before (``key``: :func:`graph_key`), so other data or a
    changed loader builds anew instead of reusing a stale graph; older entries of ``name`` beyond
    :data:`KEEP` are deleted."""
    path = cache_dir() / f"{name}-{graph_key(sources)}.npz"
    if use_cache and path.is_file():
        with contextlib.suppress(OSError):  # a read-only cache still serves
            path.touch()  # most recently used
        return CSRGraph.load(path)
    graph = build()
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        graph.save(path)
        _prune(path.parent, Path(name).name)
    return graph


def _prune(folder: Path, stem: str) -> None:
    """Delete all but the :data:`KEEP` most recently used ``<stem>-<key>.npz`` entries in ``folder``."""
    entries = [p for p in folder.glob(f"{stem}-*.npz") if len(p.stem) == len(stem) + 13]
    for old in sorted(entries, key=lambda p: p.stat().st_mtime_ns, reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
