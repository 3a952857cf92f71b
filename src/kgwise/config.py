"""Where kgwise finds its data and keeps its caches."""

from __future__ import annotations

import os
from pathlib import Path

from kgwise.errors import ConfigError

__all__ = ["cache_dir", "data_dir"]

DATA_ENV = "KGWISE_DATA"
CACHE_ENV = "KGWISE_CACHE"


def data_dir(explicit: str | Path | None = None) -> Path:
    """The shared data directory: ``explicit`` (the ``--data`` option), else ``$KGWISE_DATA``.

    Raises ``ConfigError`` naming the source of the path when it is unset or not a directory.
    """
    if explicit is not None:
        source, raw = "--data", str(explicit)
    elif os.environ.get(DATA_ENV):
        source, raw = f"${DATA_ENV}", os.environ[DATA_ENV]
    else:
        raise ConfigError(f"no data directory: pass --data DIR or set {DATA_ENV} (e.g. ../shared/data)")
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise ConfigError(f"data directory {path} (from {source}) does not exist or is not a directory")
    return path


def cache_dir() -> Path:
    """Directory for kgwise's caches (built graphs, embeddings, LLM responses): ``$KGWISE_CACHE`` or
    ``~/.cache/kgwise``; created on first use."""
    path = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kgwise").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path
