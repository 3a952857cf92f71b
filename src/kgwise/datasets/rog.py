"""Questions in RoG's KGQA format (Parquet shards or JSON Lines; see :mod:`kgwise.kg.loaders.rog`).

``gold`` holds the ``answer`` names followed by any ``a_entity`` name not among them (the names the
subgraph uses for the answers), ``topic_entities`` the ``q_entity`` names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgwise.errors import DataError
from kgwise.kg.loaders.rog import read_rog_rows
from kgwise.types import Question

__all__ = ["load_rog"]

_QUESTION_FIELDS = ("id", "question", "answer", "q_entity", "a_entity")


def _names(obj: dict[str, Any], key: str, path: Path, row: int) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"row {row}: field {key!r} is not a list of names", path)
    return tuple(v for v in value if v.strip())


def load_rog(source: str | Path, split: str | None = None) -> list[Question]:
    """The questions of ``source`` (a Parquet shard, a directory of ``<split>-*.parquet`` shards, or JSON
    Lines); ``DataError`` naming the file and row for a record without an id or question text."""
    out: list[Question] = []
    for path, row, obj in read_rog_rows(source, split, _QUESTION_FIELDS):
        qid, text = obj.get("id"), obj.get("question")
        if not isinstance(qid, str) or not qid.strip():
            raise DataError(f"row {row}: field 'id' missing or not a non-empty string", path)
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"row {row}: field 'question' missing or not a non-empty string", path)
        answers = _names(obj, "answer", path, row)
        extra = (a for a in _names(obj, "a_entity", path, row) if a not in answers)
        gold = answers + tuple(dict.fromkeys(extra))
        out.append(Question(qid, text, gold=gold, topic_entities=_names(obj, "q_entity", path, row),
                            dataset="rog", split=split or ""))
    return out
