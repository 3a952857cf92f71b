"""Small KG-based QA models (the cheap Coke arms): a QA-GNN-style graph model and its text-only baseline,
trainable on a CPU. The names below load PyTorch (the ``ml`` extra), so they are imported on first use:
importing :mod:`kgwise.kgm.config` (the ``[kgm_*]`` tables) does not need it."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "FeatureConfig",
    "GraphQA",
    "KGMPredictor",
    "ModelConfig",
    "QuestionGraph",
    "TextQA",
    "TrainConfig",
    "TrainResult",
    "build_model",
    "evaluate",
    "train_model",
]

_LAZY = {"FeatureConfig": "features", "QuestionGraph": "features", "GraphQA": "model", "ModelConfig": "model",
         "TextQA": "model", "build_model": "model", "KGMPredictor": "predictor", "TrainConfig": "train",
         "TrainResult": "train", "evaluate": "train", "train_model": "train"}


def __getattr__(name: str) -> Any:
    """The re-exported names, imported (with PyTorch) on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
