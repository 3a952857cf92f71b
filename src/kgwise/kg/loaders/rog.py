"""RoG's KGQA format (Luo et al. 2024; the ``rmanluo/RoG-webqsp`` and ``RoG-cwq`` releases) → ``CSRGraph``.

One record per question, holding the Freebase subgraph retrieved for it: ``id``, ``question``, ``answer``
(names), ``q_entity`` (topic entity names), ``a_entity`` (answer entity names), ``graph`` (a list of
``[head, relation, tail]`` name triples) and ``choices``. Read from the released Parquet shards (one file,
a glob pattern such as ``data/test-*.parquet``, or a directory holding ``<split>-*.parquet`` shards, e.g.
the release's ``data/``) or from JSON Lines with the same fields. :func:`load_rog_graph` unites the
per-question subgraphs into one graph (nodes are the names, so an entity shared by two questions'
subgraphs is one node).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError, DataError
from kgwise.files import matching_files, read_jsonl
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders._common import Interner

__all__ = ["is_rog_source", "load_rog_graph"]

_BATCH_ROWS = 64  # a WebQSP record's graph holds thousands of triples: read the shards in small batches


def _shards(source: Path, split: str | None) -> list[Path]:
    """The Parquet files of ``source`` (a file, a glob pattern such as ``data/test-*.parquet``, or a
    directory searched recursively), of ``split`` only when given (files named ``<split>-…``)."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        matched = matching_files(source)
        if not matched:
            raise DataError("RoG data not found", source)
        return matched
    files = sorted(p for p in source.rglob("*.parquet") if split is None or p.name.startswith(f"{split}-"))
    if not files:
        which = f"'{split}-*.parquet'" if split else "'*.parquet'"
        raise DataError(f"no {which} shards in this directory", source)
    return files


def is_rog_source(source: str | Path) -> bool:
    """Whether ``source`` looks like RoG data: a ``.parquet`` file, a directory of them, or JSON Lines whose
    first record has RoG's ``q_entity`` field."""
    p = Path(source)
    if p.is_dir():
        return any(p.rglob("*.parquet"))
    if p.suffix == ".parquet":  # a file or a glob pattern of shards
        return True
    if p.suffix != ".jsonl" or not p.is_file():
        return False
    with p.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    first = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(first, dict) and "q_entity" in first
    return False


def _parquet_batches(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, Any]]:
    """``(row number of the batch's first record, record batch)`` over a shard (rows counted from 1)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - the extra is part of the standard install
        raise ConfigError("reading Parquet needs pyarrow: pip install 'kgwise[rog]' (JSON Lines needs "
                          "nothing)") from exc
    import pyarrow as pa

    try:
        shard = pq.ParquetFile(path)
        missing = [c for c in columns if c not in shard.schema_arrow.names]
        if missing:
            raise DataError(f"not RoG data: no column(s) {', '.join(missing)} (has "
                            f"{', '.join(shard.schema_arrow.names)})", path)
        row = 1
        for batch in shard.iter_batches(batch_size=_BATCH_ROWS, columns=list(columns)):
            yield row, batch
            row += batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"cannot read Parquet: {exc}", path) from exc


def _check_graph(graph: Any, path: Path, row: int) -> None:
    """``DataError`` naming the file and row when a record's ``graph`` field is not a list (or null) of
    ``[head, relation, tail]`` non-empty strings."""
    if graph is None:
        return
    if not isinstance(graph, list):
        raise DataError(f"row {row}: field 'graph' is not a list of triples", path)
    for k, t in enumerate(graph):
        if not (isinstance(t, (list, tuple)) and len(t) == 3
                and all(isinstance(x, str) and x.strip() for x in t)):
            raise DataError(f"row {row}: graph triple {k} is not [head, relation, tail] strings: {t!r:.80}",
                            path)


IdArrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _graph_batches(source: str | Path, split: str | None) -> Iterator[tuple[Path, list[int], Any]]:
    """``(file, row numbers, graph column)`` in batches of up to ``_BATCH_ROWS`` records: an Arrow array
    from a Parquet shard, the decoded lists from JSON Lines."""
    src = Path(source)
    if src.is_file() and src.suffix != ".parquet":
        rows: list[int] = []
        graphs: list[Any] = []
        for row, obj in read_jsonl(src, "RoG file"):
            rows.append(row)
            graphs.append(obj.get("graph"))
            if len(rows) == _BATCH_ROWS:
                yield src, rows, graphs
                rows, graphs = [], []
        if rows:
            yield src, rows, graphs
        return
    for shard in _shards(src, split):
        for first, batch in _parquet_batches(shard, ("graph",)):
            yield shard, list(range(first, first + batch.num_rows)), batch.column(0)


def _arrow_ids(graphs: Any, nodes: Interner, rels: Interner) -> IdArrays | None:
    """A batch's ``graph`` column (an Arrow array, or lists to make one of) as id arrays without a Python
    object per triple: Arrow flattens the lists and dictionary-encodes the names, so only each distinct
    name meets the interner. ``None`` when some triple is malformed (the caller then finds and names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        if not isinstance(graphs, pa.Array):
            graphs = pa.array(graphs, type=pa.list_(pa.list_(pa.string())))
        triples = pc.list_flatten(graphs)
        values = pc.list_flatten(triples)
    except (pa.ArrowException, TypeError):  # not lists of lists of strings
        return None
    n = len(triples)
    if (triples.null_count or values.null_count or len(values) != 3 * n
            or (n and pc.min(pc.list_value_length(triples)).as_py() != 3)
            or (n and pc.min(pc.utf8_length(pc.utf8_trim_whitespace(values))).as_py() == 0)):
        return None
    cols = [values.take(pa.array(np.arange(j, 3 * n, 3))) for j in range(3)]

    def ids(names: Any, interner: Interner) -> npt.NDArray[np.int64]:
        enc = pc.dictionary_encode(names)
        table = np.asarray([interner(x) for x in enc.dictionary.to_pylist()], dtype=np.int64)
        return table[enc.indices.to_numpy(zero_copy_only=False)]

    ends = ids(pa.concat_arrays([cols[0], cols[2]]), nodes)
    return ends[:n], ids(cols[1], rels), ends[n:]


def load_rog_graph(source: str | Path, split: str | None = None, name: str | None = None) -> CSRGraph:
    """The union of every record's subgraph (duplicate triples kept once) as one graph; a source with no
    triple at all raises ``DataError``."""
    nodes, rels = Interner(), Interner()
    parts: list[IdArrays] = []
    for path, rows, graphs in _graph_batches(source, split):
        ids = _arrow_ids(graphs, nodes, rels)
        if ids is None:  # name the first malformed triple
            listed = graphs if isinstance(graphs, list) else graphs.to_pylist()
            for row, graph in zip(rows, listed, strict=True):
                _check_graph(graph, path, row)
            raise DataError(f"rows {rows[0]}–{rows[-1]}: malformed graph", path)
        parts.append(ids)
    src = Path(source)
    if not sum(len(h) for h, _, _ in parts):
        raise DataError("no graph triples in this RoG data", src)
    h, r, t = (np.concatenate(x) for x in zip(*parts, strict=True))
    return CSRGraph.from_arrays(nodes.labels, rels.labels, h, r, t,
                                name=name if name is not None else (split or src.stem))
