"""Graphs built from data files, cached as ``.npz`` under :func:`kgwise.config.cache_dir` while neither
the files nor kgwise's graph-building code change."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from kgwise.config import cache_dir
from kgwise.files import file_stamp, short_hash, source_fingerprint
from kgwise.kg.csr import CSRGraph

__all__ = ["cached_graph", "graph_key"]


def graph_key(sources: Sequence[Path]) -> str:
    """A hash of the sources' stamps (path, size, mtime) and of the source of ``kgwise.kg.loaders`` and
    ``kgwise.kg.csr``: it changes with other data or a changed loader."""
    return short_hash({"sources": [file_stamp(p) for p in sources],
                       "code": source_fingerprint("kgwise.kg.loaders", "kgwise.kg.csr")})


def cached_graph(name: str, sources: Sequence[Path], build: Callable[[], CSRGraph],
                 use_cache: bool = True) -> CSRGraph:
    """The graph ``build`` makes from ``sources`` (files or directories), reopened from
    ``<cache>/<name>-<key>.npz`` when it was built before (``key``: :func:`graph_key`), so other data or a
    changed loader builds anew instead of reusing a stale graph."""
    path = cache_dir() / f"{name}-{graph_key(sources)}.npz"
    if use_cache and path.is_file():
        return CSRGraph.load(path)
    graph = build()
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        graph.save(path)
    return graph
