"""Reading benchmark files: errors that name the file, line and field (JSON Lines come from
:func:`kgwise.files.read_jsonl`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kgwise.errors import DataError
from kgwise.files import read_jsonl
from kgwise.types import Choice, Question

__all__ = ["dataset_file", "mc_questions", "read_jsonl", "text_field"]


def dataset_file(root: Path, relative: str) -> Path:
    """``root / relative``; ``DataError`` naming the path when the file is missing."""
    path = root / relative
    if not path.is_file():
        raise DataError("benchmark file not found (is the data directory complete?)", path)
    return path


def text_field(obj: Mapping[str, Any], key: str, path: Path, line: int | None) -> str:
    """``obj[key]`` as a non-empty string, else ``DataError`` naming the field."""
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {key!r} missing or not a non-empty string", path, line)
    return value


def mc_questions(path: Path, dataset: str, split: str, keyed: bool, concept: bool = False) -> list[Question]:
    """The CSQA/OBQA records of ``path``: each record's ``id``, its ``question``'s ``stem`` and choices, its
    gold label (``answerKey``, one of the choices; none where the record has none and ``keyed`` is false)
    and with ``concept`` its ``question_concept`` (CSQA's); ``DataError`` naming the line when malformed."""
    out = []
    for line, obj in read_jsonl(path):
        q = obj.get("question")
        if not isinstance(q, dict):
            raise DataError("field 'question' missing or not an object", path, line)
        choices = mc_choices(q.get("choices"), path, line)
        gold: tuple[str, ...] = ()
        if "answerKey" in obj or keyed:
            gold = (text_field(obj, "answerKey", path, line),)
            if gold[0] not in {c.label for c in choices}:
                raise DataError(f"answerKey {gold[0]!r} is not a choice label", path, line)
        out.append(Question(id=text_field(obj, "id", path, line), text=text_field(q, "stem", path, line),
                            choices=choices, gold=gold, dataset=dataset, split=split,
                            concept=text_field(q, "question_concept", path, line) if concept else ""))
    return out


def mc_choices(raw: Any, path: Path, line: int | None) -> tuple[Choice, ...]:
    """``[{"label": "A", "text": …}, …]`` as ``Choice``s; ``DataError`` when malformed."""
    if not isinstance(raw, list) or not raw:
        raise DataError("field 'choices' missing or empty", path, line)
    out = []
    for c in raw:
        if not isinstance(c, dict):
            raise DataError(f"choice {c!r} is not an object", path, line)
        out.append(Choice(text_field(c, "label", path, line), text_field(c, "text", path, line)))
    if len({c.label for c in out}) != len(out):
        raise DataError(f"duplicate choice labels {[c.label for c in out]}", path, line)
    return tuple(out)
