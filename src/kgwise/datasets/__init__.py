"""Benchmark loaders: every data set as a list of ``kgwise.types.Question``.

``load(name, split, data)``: ``csqa`` (train/dev/test/ihtrain/ihdev/ihtest), ``obqa`` (train/dev/test),
``medqa`` (test), ``webqsp`` (test), ``cwq`` (test; or any ToG-format file of its folder named as the split,
:func:`kgwise.datasets.kgqa.split_file`). ``data`` is the shared data directory (default ``$KGWISE_DATA``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kgwise.config import data_dir
from kgwise.datasets import csqa, kgqa, medqa, obqa
from kgwise.errors import ConfigError
from kgwise.types import Question

__all__ = ["DATASETS", "load", "load_openbook_facts"]

_Loader = Callable[[Path, str], list[Question]]
_REGISTRY: dict[str, tuple[_Loader, tuple[str, ...]]] = {
    "csqa": (csqa.load_csqa, csqa.SPLITS),
    "obqa": (obqa.load_obqa, obqa.SPLITS),
    "medqa": (medqa.load_medqa, medqa.SPLITS),
    "webqsp": (kgqa.load_webqsp, kgqa.SPLITS),
    "cwq": (kgqa.load_cwq, kgqa.SPLITS),
}

DATASETS: dict[str, tuple[str, ...]] = {name: splits for name, (_, splits) in _REGISTRY.items()}
"""Data set name → its splits."""


def load(name: str, split: str, data: str | Path | None = None) -> list[Question]:
    """The questions of ``name``/``split``. Raises ``ConfigError`` for an unknown name or split or a
    missing data directory, ``DataError`` (file and line) for a malformed or missing file."""
    if name not in _REGISTRY:
        raise ConfigError(f"unknown data set {name!r}; choose one of {', '.join(_REGISTRY)}")
    loader, splits = _REGISTRY[name]
    if split not in splits and name not in kgqa.FOLDERS:  # a KGQA split may name a file of its folder
        raise ConfigError(f"unknown split {split!r} of {name}; choose one of {', '.join(splits)}")
    return loader(data_dir(data), split)


def load_openbook_facts(data: str | Path | None = None) -> list[str]:
    """OBQA's 1,326 open-book science facts."""
    return obqa.load_openbook_facts(data_dir(data))
