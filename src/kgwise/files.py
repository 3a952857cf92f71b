"""Small file helpers: atomic writes (write a temporary sibling, then rename it over the target, so that a
reader or an interrupted run that resumes never sees a half-written file) and JSON reading that names
the file and line of a fault."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.errors import DataError

__all__ = ["atomic_path", "read_json", "savez_atomic", "source_fingerprint", "write_text_atomic"]


@contextmanager
def atomic_path(path: str | Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (its name + ``suffix``; parents created); when the block
    succeeds the temporary file replaces ``path``, and whatever happens it does not outlive the block."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + suffix)
    try:
        yield tmp
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def savez_atomic(path: str | Path, arrays: Mapping[str, Any]) -> Path:
    """``np.savez`` of ``arrays`` to ``path`` atomically (the temporary name keeps the ``.npz`` ending,
    which ``np.savez`` would otherwise append)."""
    with atomic_path(path, ".tmp.npz") as tmp:
        np.savez(tmp, **arrays)
    return Path(path)


def read_json(path: str | Path) -> Any:
    """A whole JSON document; ``DataError`` naming the file (and the line of a syntax error) when it is
    missing or not JSON."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise DataError("file not found", path) from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg}", path, exc.lineno) from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", path) from exc


def source_fingerprint(*modules: str) -> str:
    """A short hash of the source of ``modules`` (dotted names; a package counts all its ``.py`` files), so a
    resumable run can tell results of other code from its own and recompute them."""
    digest = hashlib.sha1()
    for name in sorted(modules):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ValueError(f"source_fingerprint: no module named {name!r}")
        origin = Path(spec.origin)
        files = sorted(origin.parent.rglob("*.py")) if spec.submodule_search_locations else [origin]
        for f in files:
            digest.update(f"{name}:{f.relative_to(origin.parent)}\n".encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()[:12]
