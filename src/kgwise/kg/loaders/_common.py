"""Helpers shared by the KG loaders: opening (possibly gzipped) text files and interning labels."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, TextIO

from kgwise.errors import DataError

__all__ = ["Interner", "numbered_lines", "open_text", "require_dir", "require_file"]


def require_file(path: str | Path) -> Path:
    """``path`` as a ``Path``; raises ``DataError`` naming it when it is not a file."""
    p = Path(path)
    if p.is_dir():
        raise DataError("a directory, not a file (a directory source is read with another --format, e.g. "
                        "ddb or wordnet)", p)
    if not p.is_file():
        raise DataError("file not found", p)
    return p


def require_dir(path: str | Path) -> Path:
    """``path`` as a ``Path``; raises ``DataError`` naming it when it is not a directory."""
    p = Path(path)
    if not p.is_dir():
        raise DataError("directory not found", p)
    return p


def open_text(path: Path, mode: Literal["r", "w"] = "r") -> TextIO:
    """Open a UTF-8 text file for reading or writing, transparently (un)gzipping ``*.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "wt" if mode == "w" else "rt", encoding="utf-8", newline="\n")
    return path.open(mode, encoding="utf-8", newline="\n")


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` (1-based, trailing newline removed) of a text file; decoding errors become a
    ``DataError`` naming the file."""
    lineno = 0
    try:
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", path, lineno + 1) from exc
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(f"not a complete gzip file ({exc or 'truncated'})", path, lineno + 1) from exc


class Interner:
    """Assigns consecutive ids to keys in first-seen order; ``labels`` lists the display label per id."""

    __slots__ = ("ids", "labels")

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.labels: list[str] = []

    def __call__(self, key: str, label: str | None = None) -> int:
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.labels)
            self.labels.append(key if label is None else label)
        return found

    def __len__(self) -> int:
        return len(self.labels)
