"""Reading benchmark files: JSON lines and JSON documents with errors that name file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kgwise.errors import DataError
from kgwise.types import Choice

__all__ = ["dataset_file", "mc_choices", "read_jsonl", "text_field"]


def dataset_file(root: Path, relative: str) -> Path:
    """``root / relative``; ``DataError`` naming the path when the file is missing."""
    path = root / relative
    if not path.is_file():
        raise DataError("benchmark file not found (is the data directory complete?)", path)
    return path


def read_jsonl(path: Path, what: str = "file") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; a missing file (described as ``what``) or a line
    that is not a JSON object raises ``DataError`` naming file and line."""
    if not path.is_file():
        raise DataError(f"{what} not found", path)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON: {exc.msg}", path, lineno) from exc
            if not isinstance(obj, dict):
                raise DataError("expected a JSON object", path, lineno)
            yield lineno, obj


def text_field(obj: Mapping[str, Any], key: str, path: Path, line: int | None) -> str:
    """``obj[key]`` as a non-empty string, else ``DataError`` naming the field."""
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {key!r} missing or not a non-empty string", path, line)
    return value


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
